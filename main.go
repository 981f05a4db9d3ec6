// Command cloudspace-operator serves the infra.cloudspace.dev kinds: each kind's chart renders its
// children and a Go reconciler applies them and owns their lifecycle.
package main

import (
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
	"k8s.io/apimachinery/pkg/util/validation"
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
	"github.com/cloudspace-dev/cloudspace-operator/controllers"
	"github.com/cloudspace-dev/cloudspace-operator/internal/access"
	"github.com/cloudspace-dev/cloudspace-operator/internal/engine"
	"github.com/cloudspace-dev/cloudspace-operator/internal/grpcapi"
	"github.com/cloudspace-dev/cloudspace-operator/internal/watches"
	"github.com/cloudspace-dev/cloudspace-operator/internal/workspace"
)

// options are the operator's command-line settings.
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
	grpc                 grpcOptions
	kinds                controllers.Config
	webhookAddr          string
	webhookCertDir       string
	accessKeySecret      string
	zap                  zap.Options
}

// grpcOptions configure the workspace API.
type grpcOptions struct {
	addr, certFile, keyFile, tokenSecret, namespaces                string
	maxWait, tokenMaxStale, tlsReload                               time.Duration
	handshakeTimeout, idleTimeout, maxConnAge, maxConnAgeGrace      time.Duration
	maxWorkspaces, maxRunning, maxWatches, maxKept                  int
	maxConns, maxStreams, maxHeaderBytes, maxInFlight, writesPerMin int
	writeBurst                                                      int
}

func parseFlags(args []string) (*options, error) {
	o := &options{}
	fs := bindFlags(o)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	o.watchNamespaces = splitNamespaces(os.Getenv("WATCH_NAMESPACE"))
	return o, nil
}

// bindFlags is the operator's flag set, bound to o.
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
	fs.StringVar(&o.watchesFile, "watches-file", envOr("WATCHES_FILE", "./watches.yaml"),
		"Path of watches.yaml, which maps each kind to its chart (env WATCHES_FILE).")
	fs.DurationVar(&o.gracefulShutdownTime, "graceful-shutdown-timeout", 30*time.Second,
		"How long running reconciles may take to finish on shutdown.")
	fs.StringVar(&o.grpc.addr, "grpc-bind-address", "0", "Address of the workspace gRPC API, e.g. :9443; 0 disables it.")
	fs.StringVar(&o.grpc.certFile, "grpc-tls-cert-file", "", "TLS certificate of the gRPC API; a self-signed one when empty.")
	fs.StringVar(&o.grpc.keyFile, "grpc-tls-key-file", "", "TLS key of the gRPC API.")
	fs.StringVar(&o.grpc.tokenSecret, "grpc-token-secret", "cloudspace-operator-system/cloudspace-api-tokens",
		"namespace/name of the Secret of API tokens: each key a user, each value that user's bearer token.")
	fs.StringVar(&o.grpc.namespaces, "workspace-namespaces", "cloudspace-workspaces",
		"Comma list of namespaces the API creates workspaces in; the first is the default.")
	fs.DurationVar(&o.grpc.tokenMaxStale, "grpc-token-max-staleness", 5*time.Minute,
		"How long the last tokens read are served while the token Secret cannot be read; then calls are Unavailable.")
	o.kinds.Workspace.Limits = workspace.DefaultLimits()
	quantityFlag(fs, &o.kinds.Workspace.Limits.CPU, "workspace-max-cpu", "The most CPU one workspace may have, through any door.")
	quantityFlag(fs, &o.kinds.Workspace.Limits.Memory, "workspace-max-memory", "The most memory one workspace may have, through any door.")
	quantityFlag(fs, &o.kinds.Workspace.Limits.Storage, "workspace-max-storage", "The largest volume one workspace may have, through any door.")
	fs.StringVar(&o.accessKeySecret, "workspace-access-key-secret", "cloudspace-operator-system/cloudspace-workspace-access-key",
		"namespace/name of the Secret holding the key each IDE's password is derived from; created with a random key when missing.")
	o.kinds.Workspace.IngressAnnotations = map[string]string{}
	fs.Func("workspace-ingress-annotation",
		"key=value set on every workspace Ingress, e.g. cert-manager.io/cluster-issuer=letsencrypt (repeatable).",
		annotationFlag(o.kinds.Workspace.IngressAnnotations))
	fs.Func("workspace-ingress-controller-namespace",
		"Namespace of the ingress controller that serves workspace Ingresses, which each workspace's NetworkPolicy admits (repeatable); when none is given, namespaces labelled infra.cloudspace.dev/workspace-access=true.",
		namespaceFlag(&o.kinds.Workspace.IngressControllerNamespaces))
	fs.StringVar(&o.kinds.Workspace.IDEImage, "workspace-ide-image", os.Getenv("RELATED_IMAGE_WORKSPACE_IDE"),
		"Image that runs in place of the default IDE image, e.g. its mirror (env RELATED_IMAGE_WORKSPACE_IDE); workspaces naming their own image keep it.")
	fs.Func("genericdaemon-allowed-toleration",
		"A toleration GenericDaemons may carry: key, key=value, either with :Effect, or * for every key (repeatable); none by default.",
		controllers.TolerationFlag(&o.kinds.GenericDaemon.AllowedTolerations))
	fs.Func("genericdaemon-allowed-resource",
		"An extended resource GenericDaemons may request besides cpu, memory and ephemeral-storage, e.g. nvidia.com/gpu (repeatable); none by default.",
		controllers.ResourceNameFlag(&o.kinds.GenericDaemon.AllowedExtendedResources))
	fs.StringVar(&o.kinds.WorkspaceIngress.HostPattern, "workspace-ingress-host-pattern", "",
		"The only ingress host a workspace may have, with {owner}, {name} and {namespace} replaced, e.g. {owner}-{name}.ide.example.com; when empty any host, held by the workspace that claimed it first.")
	fs.DurationVar(&o.kinds.WorkspaceIngress.Recheck, "workspace-ingress-host-recheck", controllers.DefaultIngressHostRecheck,
		"How often a workspace whose ingress host another workspace holds looks again.")
	fs.BoolVar(&o.kinds.Egress.Unrestricted, "egress-unrestricted", false, "Leave the egress of workspace IDEs and VMs open.")
	fs.Func("egress-denied-cidr",
		"A CIDR workspace IDEs and VMs may not reach (repeatable); given at all, it replaces the defaults "+strings.Join(controllers.DefaultEgressDeniedCIDRs, ", ")+".",
		controllers.CIDRFlag(&o.kinds.Egress.DeniedCIDRs))
	fs.Func("egress-allowed-cidr",
		"A CIDR workspace IDEs and VMs may reach on every port even inside a denied one, e.g. an internal git host's 10.1.2.3/32 (repeatable).",
		controllers.CIDRFlag(&o.kinds.Egress.AllowedCIDRs))
	fs.StringVar(&o.kinds.Egress.DNSNamespace, "egress-dns-namespace", "kube-system", "Namespace of the cluster's DNS pods, which workspace IDEs and VMs may query.")
	fs.Func("egress-dns-pod-label", "key=value label of the cluster's DNS pods (repeatable); k8s-app=kube-dns when none.",
		controllers.LabelFlag(&o.kinds.Egress.DNSPodLabels))
	fs.Func("egress-dns-port", "Port the DNS pods serve on, UDP and TCP (repeatable); 53 when none (OpenShift: 5353).",
		controllers.PortFlag(&o.kinds.Egress.DNSPorts))
	o.kinds.VM = controllers.DefaultVMConfig()
	// OLM's mirrored installs set the operand images in RELATED_IMAGE_* variables.
	o.kinds.VM.DefaultImage = envOr("RELATED_IMAGE_VM_CONTAINERDISK", o.kinds.VM.DefaultImage)
	o.kinds.VM.LauncherImage = envOr("RELATED_IMAGE_VM_LAUNCHER", o.kinds.VM.LauncherImage)
	fs.StringVar(&o.kinds.VM.DefaultImage, "vm-default-image", o.kinds.VM.DefaultImage, "Container disk of a VirtualMachine that names none.")
	fs.StringVar(&o.kinds.VM.LauncherImage, "vm-launcher-image", o.kinds.VM.LauncherImage, "Image that runs QEMU for the pod backend (images/vm-launcher).")
	fs.StringVar(&o.kinds.VM.KVMResource, "vm-kvm-resource", o.kinds.VM.KVMResource,
		"Extended resource a device plugin grants /dev/kvm with; empty runs guests in software emulation.")
	fs.Int64Var(&o.kinds.VM.MaxCPU, "vm-max-cpu", o.kinds.VM.MaxCPU, "The most CPUs one VirtualMachine may have.")
	quantityFlag(fs, &o.kinds.VM.MaxMemory, "vm-max-memory", "The most memory one VirtualMachine may have.")
	quantityFlag(fs, &o.kinds.VM.MaxDisk, "vm-max-disk", "The largest disk one VirtualMachine may have.")
	quantityFlag(fs, &o.kinds.VM.BootDiskLimit, "vm-boot-disk-limit",
		"The most a VM's boot disk copy may grow to in its launcher pod (the guest writes its root filesystem there); the kubelet evicts the pod beyond it.")
	fs.StringVar(&o.webhookAddr, "webhook-bind-address", "0",
		"Address of the admission webhooks (HTTPS), e.g. :9444; 0 disables them.")
	fs.StringVar(&o.webhookCertDir, "webhook-cert-dir", "/tmp/k8s-webhook-server/serving-certs",
		"Directory holding the webhooks' tls.crt and tls.key (re-read when they change).")
	fs.DurationVar(&o.grpc.maxWait, "grpc-max-wait", 5*time.Minute, "Longest a create-and-wait call waits, whatever its deadline.")
	fs.IntVar(&o.grpc.maxWorkspaces, "quota-max-workspaces", 5, "Workspaces each API user may have.")
	fs.IntVar(&o.grpc.maxRunning, "quota-max-running", 2, "Running workspaces each API user may have.")
	fs.IntVar(&o.grpc.maxWatches, "quota-max-watches", 4, "Watch streams each API user may have open at once.")
	fs.IntVar(&o.grpc.maxKept, "quota-max-retained-volumes", 3,
		"Volumes each API user may keep after delete (released ones and those of workspaces with reclaimPolicy Retain).")
	fs.IntVar(&o.grpc.maxInFlight, "quota-max-calls-in-flight", 16,
		"Calls each API user may have open at once, Watch streams included; must exceed --quota-max-watches.")
	fs.IntVar(&o.grpc.writesPerMin, "quota-writes-per-minute", 30,
		"Writes (create, start, stop, delete, rotate access) each API user may make a minute.")
	fs.IntVar(&o.grpc.writeBurst, "quota-write-burst", 10,
		"Writes each API user may make at once before --quota-writes-per-minute applies.")
	fs.IntVar(&o.grpc.maxConns, "grpc-max-connections", 512, "Open connections the gRPC API accepts; one more is closed at once.")
	fs.DurationVar(&o.grpc.handshakeTimeout, "grpc-handshake-timeout", 10*time.Second,
		"Longest a new gRPC connection may take over its TLS handshake and HTTP/2 preface.")
	fs.DurationVar(&o.grpc.idleTimeout, "grpc-idle-timeout", 5*time.Minute, "A gRPC connection with no call open for this long is closed.")
	fs.DurationVar(&o.grpc.maxConnAge, "grpc-max-connection-age", 30*time.Minute,
		"Clients are asked to reconnect after this long, so that replicas share the load.")
	fs.DurationVar(&o.grpc.maxConnAgeGrace, "grpc-max-connection-age-grace", 0,
		"How long calls may go on past --grpc-max-connection-age; 0 is --grpc-max-wait plus a minute.")
	fs.IntVar(&o.grpc.maxStreams, "grpc-max-streams-per-connection", 32, "Calls open at once on one gRPC connection; more wait for a place.")
	fs.IntVar(&o.grpc.maxHeaderBytes, "grpc-max-header-bytes", 16<<10, "Largest metadata of a gRPC call, in bytes (4096 to 65536).")
	fs.DurationVar(&o.grpc.tlsReload, "grpc-tls-reload-interval", 10*time.Second,
		"How often the gRPC certificate files are read again, and looked for while missing.")
	o.zap.BindFlags(fs)
	return fs
}

// quantityFlag binds a positive quantity flag to q, whose value is the default.
func quantityFlag(fs *flag.FlagSet, q *resource.Quantity, name, usage string) {
	fs.Func(name, fmt.Sprintf("%s (default %s)", usage, q.String()), func(v string) error {
		p, err := resource.ParseQuantity(v)
		if err != nil || p.Sign() <= 0 {
			return fmt.Errorf("%q is not a positive quantity", v)
		}
		*q = p
		return nil
	})
}

// annotationFlag parses key=value into m, refusing keys the API server would refuse.
func annotationFlag(m map[string]string) func(string) error {
	return func(v string) error {
		k, val, ok := strings.Cut(v, "=")
		if !ok {
			return fmt.Errorf("%q is not key=value", v)
		}
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return fmt.Errorf("annotation key %q: %s", k, strings.Join(errs, "; "))
		}
		m[k] = val
		return nil
	}
}

// namespaceFlag appends each value, a namespace name, to list.
func namespaceFlag(list *[]string) func(string) error {
	return func(ns string) error {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return fmt.Errorf("%q is not a namespace name: %s", ns, strings.Join(errs, "; "))
		}
		*list = append(*list, ns)
		return nil
	}
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

// splitNamespaces parses WATCH_NAMESPACE: a comma list; empty means every namespace.
func splitNamespaces(v string) []string {
	var out []string
	for _, ns := range strings.Split(v, ",") {
		if ns = strings.TrimSpace(ns); ns != "" {
			out = append(out, ns)
		}
	}
	return out
}

func envOr(key, fallback string) string {
	if v, ok := os.LookupEnv(key); ok && v != "" {
		return v
	}
	return fallback
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
	cacheOpts := cache.Options{DefaultTransform: engine.SharedStrings(cache.TransformStripManagedFields())}
	if len(o.watchNamespaces) > 0 {
		cacheOpts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range o.watchNamespaces {
			cacheOpts.DefaultNamespaces[ns] = cache.Config{}
		}
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
		Cache:                         cacheOpts,
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
func setupGRPC(mgr ctrl.Manager, g grpcOptions, wc controllers.WorkspaceConfig, served bool) error {
	if g.addr == "0" || g.addr == "" {
		return nil
	}
	if !served {
		ctrl.Log.WithName("setup").Info("the workspace API is off: the watches file serves no Workspace", "grpcBindAddress", g.addr)
		return nil
	}
	ns, name, ok := strings.Cut(g.tokenSecret, "/")
	if !ok {
		return fmt.Errorf("--grpc-token-secret %q must be namespace/name", g.tokenSecret)
	}
	// The certificate's Secret is optional in the Deployment, so that an install never waits
	// for it: the server serves a self-signed one until the files appear.
	srv, err := grpcapi.New(mgr, grpcapi.WithAddress(g.addr), grpcapi.WithTLSFiles(g.certFile, g.keyFile),
		grpcapi.WithTokenSecret(ns, name), grpcapi.WithNamespaces(splitNamespaces(g.namespaces)...),
		grpcapi.WithMaxWait(g.maxWait), grpcapi.WithQuota(g.maxWorkspaces, g.maxRunning),
		grpcapi.WithTokenMaxStaleness(g.tokenMaxStale), grpcapi.WithMaxWatches(g.maxWatches),
		grpcapi.WithMaxRetainedVolumes(g.maxKept), grpcapi.WithWorkspaceLimits(wc.Limits), grpcapi.WithAccessKey(wc.AccessKey),
		grpcapi.WithMaxConnections(g.maxConns), grpcapi.WithHandshakeTimeout(g.handshakeTimeout),
		grpcapi.WithIdleTimeout(g.idleTimeout), grpcapi.WithMaxConnectionAge(g.maxConnAge, g.maxConnAgeGrace),
		grpcapi.WithMaxStreamsPerConnection(g.maxStreams), grpcapi.WithMaxHeaderBytes(g.maxHeaderBytes),
		grpcapi.WithMaxCallsInFlight(g.maxInFlight), grpcapi.WithMutationRate(g.writesPerMin, g.writeBurst),
		grpcapi.WithTLSReloadInterval(g.tlsReload))
	if err != nil {
		return fmt.Errorf("setting up the gRPC API: %w", err)
	}
	return mgr.Add(srv)
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

func run(ctx context.Context, o *options) error {
	log := ctrl.Log.WithName("setup")
	if err := setMemoryLimit(log); err != nil {
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
	// Only Workspaces need the key: an operator serving only chart kinds needs no namespace
	// of its own.
	if controllers.ServesWorkspaces(ws) {
		if o.kinds.Workspace.AccessKey, err = accessKey(ctx, cfg, o.accessKeySecret); err != nil {
			return err
		}
	}
	if err := controllers.Setup(mgr, ws, o.kinds, engine.WithNamespaces(o.watchNamespaces),
		// OLM passes the cluster's proxy to the operator; the operands reach out through it too.
		engine.WithOperandEnv(proxy.ReadProxyVarsFromEnv())); err != nil {
		return fmt.Errorf("setting up controllers: %w", err)
	}
	if mopts.WebhookServer != nil {
		if err := controllers.SetupVirtualMachineWebhook(mgr, o.kinds.VM); err != nil {
			return fmt.Errorf("setting up webhooks: %w", err)
		}
	}
	if err := setupGRPC(mgr, o.grpc, o.kinds.Workspace, controllers.ServesWorkspaces(ws)); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return fmt.Errorf("adding health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("informers", cacheSynced(mgr.GetCache())); err != nil {
		return fmt.Errorf("adding ready check: %w", err)
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
