// Package integration runs the operator's controllers against a real kube-apiserver and etcd
// (envtest, with the binaries built into bin/ and named by KUBEBUILDER_ASSETS).
package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/cloudspace-dev/cloudspace-operator/controllers"
	"github.com/cloudspace-dev/cloudspace-operator/internal/access"
	"github.com/cloudspace-dev/cloudspace-operator/internal/engine"

	// Named apart from the suite's running operator (var operator).
	"github.com/cloudspace-dev/cloudspace-operator/app"
	"github.com/cloudspace-dev/cloudspace-operator/internal/watches"
	"github.com/cloudspace-dev/cloudspace-operator/internal/workspace"
	"github.com/cloudspace-dev/cloudspace-operator/test/framework"
)

var (
	cfg       *rest.Config
	k8sClient client.Client
	clientset *kubernetes.Clientset
	operator  *runningManager
)

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		fmt.Fprintln(os.Stderr, "KUBEBUILDER_ASSETS is not set: run `make test-integration`, which builds etcd and kube-apiserver into bin/")
		return 1
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	// The suite's managers list as the binary's do.
	if err := app.StreamInitialLists(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	root := framework.RepoRoot()
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(root, "config", "crd", "bases"), filepath.Join(root, "test", "testdata", "crds")},
		ErrorIfCRDPathMissing: true,
		// The webhooks are served by the manager and called by the real API server.
		WebhookInstallOptions: envtest.WebhookInstallOptions{Paths: []string{filepath.Join(root, "config", "webhook")}},
	}
	var err error
	webhookOpts = &env.WebhookInstallOptions
	if cfg, err = env.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "starting envtest: %v\n", err)
		// Start may fail after starting etcd and kube-apiserver (a CRD that does not install):
		// stop what it started rather than leave it running.
		if err := env.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stopping envtest: %v\n", err)
		}
		return 1
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stopping envtest: %v\n", err)
		}
	}()
	if k8sClient, err = client.New(cfg, client.Options{Scheme: framework.Scheme()}); err != nil {
		fmt.Fprintf(os.Stderr, "creating client: %v\n", err)
		return 1
	}
	clientset = kubernetes.NewForConfigOrDie(cfg)
	// As the operator does at start: the key is made once and read back by every start.
	if accessKey, err = access.EnsureKey(context.Background(), k8sClient, accessKeyRef); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if operator, err = startManager(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	if err := operator.stop(); err != nil {
		fmt.Fprintf(os.Stderr, "stopping the manager: %v\n", err)
		code = 1
	}
	return code
}

// accessKeyRef is where the suite keeps the operator's access key; accessKey is the key.
var (
	accessKeyRef = types.NamespacedName{Namespace: "default", Name: "cloudspace-workspace-access-key"}
	accessKey    []byte
)

// vmConfig is the operator's VM settings in these tests: small limits, so the tests can pass them.
var vmConfig = func() controllers.VMConfig {
	c := controllers.DefaultVMConfig()
	c.MaxCPU, c.MaxMemory, c.MaxDisk = 8, resource.MustParse("16Gi"), resource.MustParse("100Gi")
	return c
}()

// webhookOpts are where envtest told the API server the webhooks are served.
var webhookOpts *envtest.WebhookInstallOptions

// runningManager is the operator's manager running in this process.
type runningManager struct {
	cancel context.CancelFunc
	done   chan error
}

// startManager runs the operator's controllers for the test watches file: GenericDaemon and
// Workspace with their Go lifecycles and Demo, a chart kind that no Go code knows. With
// namespaces, it serves only those (as WATCH_NAMESPACE does).
func startManager(namespaces ...string) (*runningManager, error) {
	return startManagerWith(nil, namespaces...)
}

// startManagerWith is startManager with more engine options (operand env, say).
func startManagerWith(opts []engine.Option, namespaces ...string) (*runningManager, error) {
	os.Setenv("DEMO_PORT", framework.DemoPort)
	ws, err := watches.Load(filepath.Join(framework.RepoRoot(), "test", "testdata", "watches.yaml"))
	if err != nil {
		return nil, err
	}
	return startManagerOf(ws, true, opts, namespaces...)
}

// startManagerOf runs the operator's controllers for ws, and its webhooks when asked (one
// manager at a time can serve them: they share the test API server's configuration).
func startManagerOf(ws []watches.Watch, withWebhooks bool, opts []engine.Option, namespaces ...string) (*runningManager, error) {
	return startConfigured(ws, withWebhooks, suiteKinds(), opts, namespaces...)
}

// suiteKinds is the kinds' configuration the suite's operator runs with, given the key as the
// operator gives it (outside a cluster: no namespace of its own).
func suiteKinds() controllers.Config {
	kinds := controllers.Config{
		Workspace: controllers.WorkspaceConfig{
			Limits: workspace.DefaultLimits(), MaxFailedStarts: controllers.DefaultMaxFailedStarts,
			IdleWarning: controllers.DefaultIdleWarning, ActivityInterval: 500 * time.Millisecond,
			IngressAnnotations: map[string]string{"cert-manager.io/cluster-issuer": "test-issuer"},
		},
		VM: vmConfig,
	}
	kinds.VM.ActivityInterval = 500 * time.Millisecond
	return app.WithKey(kinds, accessKey, "")
}

// startConfigured is startManagerOf with the kinds configured as an admin's flags would.
func startConfigured(ws []watches.Watch, withWebhooks bool, kinds controllers.Config, opts []engine.Option, namespaces ...string) (*runningManager, error) {
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 framework.Scheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  app.CacheOptions(namespaces),
		// Tests restart the manager in one process; names are unique within each manager.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
		WebhookServer: webhook.NewServer(webhook.Options{
			Host: webhookOpts.LocalServingHost, Port: webhookOpts.LocalServingPort, CertDir: webhookOpts.LocalServingCertDir,
		}),
	})
	if err != nil {
		return nil, fmt.Errorf("creating manager: %w", err)
	}
	if err := app.Setup(mgr, ws, kinds, app.Scope{Namespaces: namespaces, Webhooks: withWebhooks}, opts...); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &runningManager{cancel: cancel, done: make(chan error, 1)}
	go func() { m.done <- mgr.Start(ctx) }()
	syncCtx, syncCancel := context.WithTimeout(ctx, time.Minute)
	defer syncCancel()
	if !mgr.GetCache().WaitForCacheSync(syncCtx) {
		cancel()
		return nil, fmt.Errorf("manager cache did not sync")
	}
	if !withWebhooks {
		return m, nil
	}
	// A test that admits a VirtualMachine right after a restart needs the webhooks served.
	webhooks := mgr.GetWebhookServer().StartedChecker()
	if err := wait.PollUntilContextCancel(syncCtx, 50*time.Millisecond, true, func(context.Context) (bool, error) {
		return webhooks(nil) == nil, nil
	}); err != nil {
		cancel()
		return nil, fmt.Errorf("the webhook server did not start: %w", err)
	}
	return m, nil
}

func (m *runningManager) stop() error {
	m.cancel()
	select {
	case err := <-m.done:
		return err
	case <-time.After(time.Minute):
		return fmt.Errorf("manager did not stop within a minute")
	}
}
