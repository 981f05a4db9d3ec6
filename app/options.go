package app

import (
	"cmp"
	"flag"
	"os"
	"time"

	"k8s.io/client-go/rest"
)

// Options are the operator's own settings, as its flags give them (BindFlags): its manager's,
// and the kinds it serves where. The workspace API's and the kinds' own are their packages'
// (grpcapi.Config, controllers.Config).
type Options struct {
	// MetricsAddr is where metrics are served ("0": nowhere); over HTTPS, authenticated and
	// authorized through the API server, when MetricsSecure, with the tls.crt and tls.key in
	// MetricsCertDir (a self-signed pair when empty). EnableHTTP2 allows HTTP/2 there.
	MetricsAddr    string
	MetricsSecure  bool
	MetricsCertDir string
	EnableHTTP2    bool
	// ProbeAddr serves /healthz and /readyz (AddProbes); PprofAddr the Go profiler ("0": off).
	ProbeAddr, PprofAddr string
	// LeaderElect elects one replica to reconcile, through the Lease LeaderElectionID in
	// LeaderElectionNamespace (the operator's own when empty).
	LeaderElect                               bool
	LeaderElectionID, LeaderElectionNamespace string
	// GracefulShutdownTimeout is how long running reconciles may take to finish on shutdown.
	GracefulShutdownTimeout time.Duration
	// WebhookAddr serves the admission webhooks ("0": off; ServesWebhooks) with the tls.crt and
	// tls.key in WebhookCertDir.
	WebhookAddr, WebhookCertDir string
	// WatchesFile maps each kind to its chart.
	WatchesFile string
	// WatchNamespaces are the only namespaces served when any. Not a flag: the environment's
	// WATCH_NAMESPACE, as OLM sets it.
	WatchNamespaces []string
}

// BindFlags registers the operator's own flags on fs, bound to o. Where the environment of a
// cluster or of OLM says otherwise, it sets the defaults.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", "0",
		"Address the metrics endpoint binds to, e.g. :8443 (HTTPS) or :8080 (HTTP); 0 disables it.")
	fs.BoolVar(&o.MetricsSecure, "metrics-secure", true,
		"Serve metrics over HTTPS, authenticated and authorized through the API server.")
	fs.StringVar(&o.MetricsCertDir, "metrics-cert-path", "",
		"Directory holding tls.crt and tls.key for the metrics server; a self-signed pair when empty.")
	fs.BoolVar(&o.EnableHTTP2, "enable-http2", false,
		"Allow HTTP/2 on the metrics server (off because of the HTTP/2 rapid-reset CVEs).")
	fs.StringVar(&o.ProbeAddr, "health-probe-bind-address", ":8081", "Address the /healthz and /readyz probes bind to.")
	fs.StringVar(&o.PprofAddr, "pprof-bind-address", "0", "Address of the Go profiler (/debug/pprof); 0 disables it.")
	fs.BoolVar(&o.LeaderElect, "leader-elect", inCluster(),
		"Elect a leader so that only one replica reconciles; on by default when running in a cluster.")
	fs.StringVar(&o.LeaderElectionID, "leader-election-id", "cloudspace-operator.infra.cloudspace.dev",
		"Name of the Lease used for leader election.")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", os.Getenv("POD_NAMESPACE"),
		"Namespace of the leader-election Lease; the operator's own (env POD_NAMESPACE, else its service account's) when empty.")
	fs.StringVar(&o.WatchesFile, "watches-file", cmp.Or(os.Getenv("WATCHES_FILE"), "./watches.yaml"),
		"Path of watches.yaml, which maps each kind to its chart (env WATCHES_FILE).")
	fs.DurationVar(&o.GracefulShutdownTimeout, "graceful-shutdown-timeout", 30*time.Second,
		"How long running reconciles may take to finish on shutdown.")
	fs.StringVar(&o.WebhookAddr, "webhook-bind-address", "0",
		"Address of the admission webhooks (HTTPS), e.g. :9444; 0 disables them.")
	fs.StringVar(&o.WebhookCertDir, "webhook-cert-dir", "/tmp/k8s-webhook-server/serving-certs",
		"Directory holding the webhooks' tls.crt and tls.key (re-read when they change).")
}

func inCluster() bool {
	_, err := rest.InClusterConfig()
	return err == nil
}
