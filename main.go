// Command cloudspace-operator serves the infra.cloudspace.dev kinds: each kind's chart renders its
// children and a Go reconciler applies them and owns their lifecycle.
package main

import (
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"strings"

	"github.com/go-logr/logr"
	"github.com/operator-framework/operator-lib/proxy"
	"k8s.io/apimachinery/pkg/api/resource"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/cloudspace-dev/cloudspace-operator/app"
	"github.com/cloudspace-dev/cloudspace-operator/controllers"
	"github.com/cloudspace-dev/cloudspace-operator/internal/alerts"
	"github.com/cloudspace-dev/cloudspace-operator/internal/engine"
	"github.com/cloudspace-dev/cloudspace-operator/internal/grpcapi"
	"github.com/cloudspace-dev/cloudspace-operator/internal/namespaces"
	"github.com/cloudspace-dev/cloudspace-operator/internal/watches"
)

// alertRules are the operator's alerting rules, the PrometheusRule it installs where
// Prometheus Operator runs (config/prometheus, which promtool tests).
//
//go:embed config/prometheus/prometheusrule.yaml
var alertRules []byte

// options are the operator's command line: its own settings, the workspace API's, the kinds'
// and the alerting rules', which their packages bind to their flags with their defaults, and
// the logger's.
type options struct {
	app    app.Options
	grpc   grpcapi.Config
	kinds  controllers.Config
	alerts alerts.Config
	zap    zap.Options
}

// newOptions are the defaults of the settings whose packages define them; bindFlags sets the
// others'.
func newOptions() *options {
	return &options{grpc: grpcapi.DefaultConfig(), kinds: controllers.DefaultConfig(), alerts: alerts.DefaultConfig()}
}

func parseFlags(args []string) (*options, error) {
	o := newOptions()
	fs := bindFlags(o)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if err := setFromEnv(fs, os.LookupEnv); err != nil {
		fmt.Fprintln(fs.Output(), err)
		return nil, err
	}
	o.app.WatchNamespaces = namespaces.Split(os.Getenv("WATCH_NAMESPACE"))
	return o, nil
}

// envPrefix starts the environment variable that sets each flag (envName).
const envPrefix = "CLOUDSPACE_"

// envName is the environment variable that sets the flag: CLOUDSPACE_WORKSPACE_IDE_AUTH sets
// --workspace-ide-auth.
func envName(flagName string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// setFromEnv sets every flag whose environment variable is set, after the command line, so
// that the environment wins: an OLM install's command line is its CSV's, which the admin
// does not edit, and its Subscription's spec.config.env is where they configure the operator.
// A repeatable flag gets the environment's value besides the command line's.
func setFromEnv(fs *flag.FlagSet, lookup func(string) (string, bool)) error {
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		name := envName(f.Name)
		if v, ok := lookup(name); ok {
			if err := fs.Set(f.Name, v); err != nil {
				errs = append(errs, fmt.Errorf("invalid value %q of %s for --%s: %w", v, name, f.Name, err))
			}
		}
	})
	return errors.Join(errs...)
}

// bindFlags is the operator's flag set, bound to o: the operator's own flags, then the API's
// and the kinds' with o's values as their defaults, then the logger's.
func bindFlags(o *options) *flag.FlagSet {
	fs := flag.NewFlagSet("cloudspace-operator", flag.ContinueOnError)
	o.app.BindFlags(fs)
	o.grpc.BindFlags(fs)
	o.kinds.BindFlags(fs)
	o.alerts.BindFlags(fs)
	o.zap.BindFlags(fs)
	return fs
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
	ws, err := watches.Load(o.app.WatchesFile)
	if err != nil {
		return err
	}
	mgr, err := app.NewManager(o.app)
	if err != nil {
		return err
	}
	if err := setup(ctx, mgr, ws, o); err != nil {
		return err
	}
	log.Info("starting manager", "watches", o.app.WatchesFile, "kinds", len(ws),
		"namespaces", o.app.WatchNamespaces, "leaderElection", o.app.LeaderElect)
	return mgr.Start(ctx)
}

// setup serves the kinds of ws on mgr, with the operator key when they need it, the workspace
// API and the probes.
func setup(ctx context.Context, mgr ctrl.Manager, ws []watches.Watch, o *options) error {
	// Only Workspaces and VMs need the key, and only Workspaces the API: an operator serving
	// only chart kinds needs no namespace of its own.
	if controllers.NeedsAccessKey(ws) {
		key, err := app.AccessKey(ctx, mgr.GetConfig(), o.kinds.Workspace.AccessKeySecret)
		if err != nil {
			return err
		}
		o.kinds = app.WithKey(o.kinds, key, os.Getenv("POD_NAMESPACE"))
	}
	scope := app.Scope{Namespaces: o.app.WatchNamespaces, Webhooks: o.app.ServesWebhooks()}
	// OLM passes the cluster's proxy to the operator; the operands reach out through it too.
	if err := app.Setup(mgr, ws, o.kinds, scope, engine.WithOperandEnv(proxy.ReadProxyVarsFromEnv())); err != nil {
		return err
	}
	if err := app.SetupGRPC(mgr, o.grpc, o.kinds.Workspace, controllers.ServesWorkspaces(ws)); err != nil {
		return err
	}
	if err := app.SetupAlerts(mgr, o.alerts, alertRules, os.Getenv("POD_NAMESPACE"), os.Getenv("POD_NAME")); err != nil {
		return err
	}
	return app.AddProbes(mgr)
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
