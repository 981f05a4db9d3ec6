// Command cloudspace-operator serves the infra.cloudspace.dev kinds: each kind's chart renders its
// children and a Go reconciler applies them and owns their lifecycle.
package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/operator-framework/operator-lib/proxy"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/app"
	"github.com/cloudspace-dev/cloudspace-operator/controllers"
	"github.com/cloudspace-dev/cloudspace-operator/internal/access"
	"github.com/cloudspace-dev/cloudspace-operator/internal/activity"
	"github.com/cloudspace-dev/cloudspace-operator/internal/engine"
	"github.com/cloudspace-dev/cloudspace-operator/internal/grpcapi"
	"github.com/cloudspace-dev/cloudspace-operator/internal/namespaces"
	"github.com/cloudspace-dev/cloudspace-operator/internal/watches"
)

// options are the operator's command-line settings: the manager's own, and those of the
// workspace API and of the kinds, which their packages define with their defaults.
type options struct {
	metricsAddr          string
	metricsSecure        bool
	metricsCertDir       string
	enableHTTP2          bool
	probeAddr            string
	pprofAddr            string
	leaderElect          bool
	leaderElectionID     string
	leaderElectionNS     string
	watchesFile          string
	watchNamespaces      []string
	gracefulShutdownTime time.Duration
	grpc                 grpcapi.Config
	kinds                controllers.Config
	webhookAddr          string
	webhookCertDir       string
	zap                  zap.Options
}

// newOptions are the defaults of the settings whose packages define them; bindFlags sets the
// manager's own.
func newOptions() *options {
	return &options{grpc: grpcapi.DefaultConfig(), kinds: controllers.DefaultConfig()}
}

func parseFlags(args []string) (*options, error) {
	o := newOptions()
	fs := bindFlags(o)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	o.watchNamespaces = namespaces.Split(os.Getenv("WATCH_NAMESPACE"))
	return o, nil
}

// bindFlags is the operator's flag set, bound to o: the manager's flags, then the API's and
// the kinds' with o's values as their defaults.
func bindFlags(o *options) *flag.FlagSet {
	fs := flag.NewFlagSet("cloudspace-operator", flag.ContinueOnError)
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", "0",
		"Address the metrics endpoint binds to, e.g. :8443 (HTTPS) or :8080 (HTTP); 0 disables it.")
	fs.BoolVar(&o.metricsSecure, "metrics-secure", true,
		"Serve metrics over HTTPS, authenticated and authorized through the API server.")
	fs.StringVar(&o.metricsCertDir, "metrics-cert-path", "",
		"Directory holding tls.crt and tls.key for the metrics server; a self-signed pair when empty.")
	fs.BoolVar(&o.enableHTTP2, "enable-http2", false,
		"Allow HTTP/2 on the metrics server (off because of the HTTP/2 rapid-reset CVEs).")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "Address the /healthz and /readyz probes bind to.")
	fs.StringVar(&o.pprofAddr, "pprof-bind-address", "0", "Address of the Go profiler (/debug/pprof); 0 disables it.")
	fs.BoolVar(&o.leaderElect, "leader-elect", inCluster(),
		"Elect a leader so that only one replica reconciles; on by default when running in a cluster.")
	fs.StringVar(&o.leaderElectionID, "leader-election-id", "cloudspace-operator.infra.cloudspace.dev",
		"Name of the Lease used for leader election.")
	fs.StringVar(&o.leaderElectionNS, "leader-election-namespace", os.Getenv("POD_NAMESPACE"),
		"Namespace of the leader-election Lease; the operator's own (env POD_NAMESPACE, else its service account's) when empty.")
	fs.StringVar(&o.watchesFile, "watches-file", cmp.Or(os.Getenv("WATCHES_FILE"), "./watches.yaml"),
		"Path of watches.yaml, which maps each kind to its chart (env WATCHES_FILE).")
	fs.DurationVar(&o.gracefulShutdownTime, "graceful-shutdown-timeout", 30*time.Second,
		"How long running reconciles may take to finish on shutdown.")
	fs.StringVar(&o.webhookAddr, "webhook-bind-address", "0",
		"Address of the admission webhooks (HTTPS), e.g. :9444; 0 disables them.")
	fs.StringVar(&o.webhookCertDir, "webhook-cert-dir", "/tmp/k8s-webhook-server/serving-certs",
		"Directory holding the webhooks' tls.crt and tls.key (re-read when they change).")
	o.grpc.BindFlags(fs)
	o.kinds.BindFlags(fs)
	o.zap.BindFlags(fs)
	return fs
}

// accessKey reads (or creates) the key the IDE passwords are derived from, before the manager
// starts: no workspace renders without it.
func accessKey(ctx context.Context, cfg *rest.Config, ref string) ([]byte, error) {
	ns, name, ok := strings.Cut(ref, "/")
	if !ok {
		return nil, fmt.Errorf("--workspace-access-key-secret %q must be namespace/name", ref)
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return nil, fmt.Errorf("creating a client: %w", err)
	}
	key, err := access.EnsureKey(ctx, c, types.NamespacedName{Namespace: ns, Name: name})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%w: create namespace %s, or name a Secret in an existing one with --workspace-access-key-secret", err, ns)
	}
	return key, err
}

func inCluster() bool {
	_, err := rest.InClusterConfig()
	return err == nil
}

func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(infrav1alpha1.AddToScheme(s))
	return s
}

func managerOptions(o *options) (ctrl.Options, error) {
	var tlsOpts []func(*tls.Config)
	if !o.enableHTTP2 {
		tlsOpts = append(tlsOpts, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	}
	metrics := metricsserver.Options{BindAddress: o.metricsAddr, SecureServing: o.metricsSecure, TLSOpts: tlsOpts, CertDir: o.metricsCertDir}
	if o.metricsSecure {
		metrics.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	webhooks, err := webhookServer(o.webhookAddr, o.webhookCertDir, tlsOpts)
	if err != nil {
		return ctrl.Options{}, err
	}
	return ctrl.Options{
		Scheme:                        newScheme(),
		Metrics:                       metrics,
		HealthProbeBindAddress:        o.probeAddr,
		PprofBindAddress:              o.pprofAddr,
		LeaderElection:                o.leaderElect,
		LeaderElectionID:              o.leaderElectionID,
		LeaderElectionNamespace:       o.leaderElectionNS,
		LeaderElectionReleaseOnCancel: true,
		GracefulShutdownTimeout:       &o.gracefulShutdownTime,
		Cache:                         app.CacheOptions(o.watchNamespaces),
		WebhookServer:                 webhooks,
	}, nil
}

// webhookServer is the admission webhook server at addr, or nil when addr is 0. Its
// certificate is watched: a rotated one (cert-manager, OLM) is served without a restart.
func webhookServer(addr, certDir string, tlsOpts []func(*tls.Config)) (webhook.Server, error) {
	if addr == "0" || addr == "" {
		return nil, nil
	}
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("--webhook-bind-address %q: %w", addr, err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return nil, fmt.Errorf("--webhook-bind-address %q: the port is not a number", addr)
	}
	return webhook.NewServer(webhook.Options{Host: host, Port: port, CertDir: certDir, TLSOpts: tlsOpts}), nil
}

// setupGRPC adds the workspace API to the manager when an address is set and Workspaces are
// served: without them it would have nothing to serve (the shipped Deployment sets an address).
func setupGRPC(mgr ctrl.Manager, g grpcapi.Config, wc controllers.WorkspaceConfig, served bool) error {
	if !g.Enabled() {
		return nil
	}
	if !served {
		ctrl.Log.WithName("setup").Info("the workspace API is off: the watches file serves no Workspace", "grpcBindAddress", g.Address)
		return nil
	}
	// The certificate's Secret is optional in the Deployment, so that an install never waits
	// for it: the server serves a self-signed one until the files appear.
	srv, err := grpcapi.New(mgr, g, grpcapi.WorkspaceKind{Limits: wc.Limits, AccessKey: wc.AccessKey, Activity: wc.Activity})
	if err != nil {
		return fmt.Errorf("setting up the gRPC API: %w", err)
	}
	if err := mgr.Add(srv); err != nil {
		return fmt.Errorf("adding the gRPC API to the manager: %w", err)
	}
	return nil
}

// addProbes adds /healthz, which answers while the process runs, and /readyz, which answers
// once the informers have synced: a replica is not sent traffic before it can serve it.
func addProbes(mgr ctrl.Manager) error {
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return fmt.Errorf("adding health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("informers", cacheSynced(mgr.GetCache())); err != nil {
		return fmt.Errorf("adding ready check: %w", err)
	}
	return nil
}

// cacheSynced is a readiness check: the operator is ready once its informers have synced.
func cacheSynced(c cache.Cache) healthz.Checker {
	return func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), time.Second)
		defer cancel()
		if !c.WaitForCacheSync(ctx) {
			return errors.New("informer caches have not synced")
		}
		return nil
	}
}

// memoryLimitShare is the part of the container's memory limit the Go heap may grow to before
// the garbage collector works to stay under it; the rest is the binary's mapped code, stacks
// and what the runtime holds outside the heap.
const memoryLimitShare = 0.9

// softMemoryLimit is the Go runtime's soft memory limit for a container limit of containerLimit
// bytes (the MEMORY_LIMIT the Deployment passes from its resources); 0 means none: no
// container limit, or GOMEMLIMIT set, which the runtime has already applied.
func softMemoryLimit(containerLimit string, gomemlimitSet bool) (int64, error) {
	if containerLimit == "" || gomemlimitSet {
		return 0, nil
	}
	q, err := resource.ParseQuantity(containerLimit)
	if err != nil || q.Sign() <= 0 {
		return 0, fmt.Errorf("MEMORY_LIMIT %q is not a positive quantity of bytes", containerLimit)
	}
	return int64(float64(q.Value()) * memoryLimitShare), nil
}

// setMemoryLimit applies softMemoryLimit from the environment. Without it the heap may double
// past the container's limit before a collection, and the kernel kills the operator for
// garbage (docs/engine.md: "Memory").
func setMemoryLimit(log logr.Logger) error {
	_, gomemlimitSet := os.LookupEnv("GOMEMLIMIT")
	limit, err := softMemoryLimit(os.Getenv("MEMORY_LIMIT"), gomemlimitSet)
	if err != nil || limit == 0 {
		return err
	}
	debug.SetMemoryLimit(limit)
	log.Info("soft memory limit set", "bytes", limit)
	return nil
}

// gcPercent is the operator's garbage collection target (GOGC): a collection once the heap has
// grown by half over what was live after the last one, where Go's default waits until it has
// doubled. What is live is mostly the caches, held for the operator's whole life, so the
// default's headroom is the largest part of its memory at scale: at 10,000 resources, 193 MiB
// peak RSS at a restart against 125 MiB with 50, for about 8% more CPU while they are created
// (docs/engine.md, "Memory").
const gcPercent = 50

// setGCPercent applies gcPercent, unless GOGC is set, which the runtime has already applied.
func setGCPercent(log logr.Logger) {
	if _, set := os.LookupEnv("GOGC"); set {
		return
	}
	debug.SetGCPercent(gcPercent)
	log.Info("garbage collection target set", "percent", gcPercent)
}

func run(ctx context.Context, o *options) error {
	log := ctrl.Log.WithName("setup")
	setGCPercent(log)
	if err := setMemoryLimit(log); err != nil {
		return err
	}
	if err := app.StreamInitialLists(); err != nil {
		return err
	}
	ws, err := watches.Load(o.watchesFile)
	if err != nil {
		return err
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	mopts, err := managerOptions(o)
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, mopts)
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}
	// Only Workspaces and VMs need the key, and only Workspaces the API: an operator serving
	// only chart kinds needs no namespace of its own.
	workspaces := controllers.ServesWorkspaces(ws)
	if controllers.NeedsAccessKey(ws) {
		key, err := accessKey(ctx, cfg, o.kinds.Workspace.AccessKeySecret)
		if err != nil {
			return err
		}
		o.kinds.Workspace.AccessKey, o.kinds.VM.AccessKey = key, key
		o.kinds.Workspace.Activity, o.kinds.Workspace.OperatorNamespace = activity.New(), os.Getenv("POD_NAMESPACE")
		o.kinds.VM.Activity, o.kinds.VM.OperatorNamespace = activity.New(), os.Getenv("POD_NAMESPACE")
	}
	scope := app.Scope{Namespaces: o.watchNamespaces, Webhooks: mopts.WebhookServer != nil}
	// OLM passes the cluster's proxy to the operator; the operands reach out through it too.
	if err := app.Setup(mgr, ws, o.kinds, scope, engine.WithOperandEnv(proxy.ReadProxyVarsFromEnv())); err != nil {
		return err
	}
	if err := setupGRPC(mgr, o.grpc, o.kinds.Workspace, workspaces); err != nil {
		return err
	}
	if err := addProbes(mgr); err != nil {
		return err
	}
	log.Info("starting manager", "watches", o.watchesFile, "kinds", len(ws),
		"namespaces", o.watchNamespaces, "leaderElection", o.leaderElect)
	return mgr.Start(ctx)
}

func main() {
	o, err := parseFlags(os.Args[1:])
	if err != nil {
		os.Exit(2)
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&o.zap)))
	if err := run(ctrl.SetupSignalHandler(), o); err != nil {
		ctrl.Log.WithName("setup").Error(err, "operator stopped")
		os.Exit(1)
	}
}
