package app

import (
	"crypto/tls"
	"fmt"
	"net"
	"strconv"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
)

// NewManager is the operator's manager, on the cluster of the kubeconfig (or the one it runs in).
func NewManager(o Options) (ctrl.Manager, error) {
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	opts, err := ManagerOptions(o)
	if err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		return nil, fmt.Errorf("creating manager: %w", err)
	}
	return mgr, nil
}

// ManagerOptions are the manager's options as o sets them.
func ManagerOptions(o Options) (ctrl.Options, error) {
	var tlsOpts []func(*tls.Config)
	if !o.EnableHTTP2 {
		tlsOpts = append(tlsOpts, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	}
	metrics := metricsserver.Options{BindAddress: o.MetricsAddr, SecureServing: o.MetricsSecure, TLSOpts: tlsOpts, CertDir: o.MetricsCertDir}
	if o.MetricsSecure {
		metrics.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	webhooks, err := webhookServer(o, tlsOpts)
	if err != nil {
		return ctrl.Options{}, err
	}
	return ctrl.Options{
		Scheme:                        newScheme(),
		Metrics:                       metrics,
		HealthProbeBindAddress:        o.ProbeAddr,
		PprofBindAddress:              o.PprofAddr,
		LeaderElection:                o.LeaderElect,
		LeaderElectionID:              o.LeaderElectionID,
		LeaderElectionNamespace:       o.LeaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
		GracefulShutdownTimeout:       &o.GracefulShutdownTimeout,
		Cache:                         CacheOptions(o.WatchNamespaces),
		WebhookServer:                 webhooks,
	}, nil
}

func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(infrav1alpha1.AddToScheme(s))
	return s
}

// ServesWebhooks reports whether o serves the admission webhooks: WebhookAddr is neither 0
// nor empty.
func (o Options) ServesWebhooks() bool {
	return o.WebhookAddr != "0" && o.WebhookAddr != ""
}

// webhookServer is the admission webhook server of o, or nil when o serves none. Its
// certificate is watched: a rotated one (cert-manager, OLM) is served without a restart.
func webhookServer(o Options, tlsOpts []func(*tls.Config)) (webhook.Server, error) {
	if !o.ServesWebhooks() {
		return nil, nil
	}
	host, portText, err := net.SplitHostPort(o.WebhookAddr)
	if err != nil {
		return nil, fmt.Errorf("--webhook-bind-address %q: %w", o.WebhookAddr, err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return nil, fmt.Errorf("--webhook-bind-address %q: the port is not a number", o.WebhookAddr)
	}
	return webhook.NewServer(webhook.Options{Host: host, Port: port, CertDir: o.WebhookCertDir, TLSOpts: tlsOpts}), nil
}
