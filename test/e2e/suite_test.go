// Package e2e runs the operator binary against a private embedded KWOK cluster: real etcd,
// kube-apiserver, kube-controller-manager and kube-scheduler, with fake nodes.
package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/cloudspace-dev/cloudspace-operator/test/framework"
	"github.com/cloudspace-dev/cloudspace-operator/test/infra/devwebhook"
)

var (
	cluster   *framework.Cluster
	operator  *framework.Operator
	k8sClient client.Client
	// grpcAddr and grpcTLS are where the operator serves the workspace API, and its CA.
	grpcAddr string
	grpcTLS  framework.TLSFiles
	// legacyAddr is the operator's plaintext legacy listener, acting as legacyUser.
	legacyAddr string
	// restartOperator stops the operator and starts it again with the same flags, and extra
	// ones after them (a later flag wins).
	restartOperator func(ctx context.Context, extra ...string) error
	// operatorBinary and operatorArgs are how the operator was started, for a second replica.
	operatorBinary string
	operatorArgs   []string
	// webhookAddr and webhookDir are where the operator serves its webhooks and their certificate.
	webhookAddr, webhookDir string
)

// The API's users and their tokens, as stored in the token Secret.
var tokens = map[string]string{"alice": "tok-alice-4f1c", "bob": "tok-bob-9a2e", "carol": "tok-carol-77d0", "dave": "tok-dave-5b1e",
	"erin": "tok-erin-3c8a"}

// testdata holds Demo, the pure chart kind the suite's operator serves besides the shipped kinds.
var testdata = filepath.Join(framework.RepoRoot(), "test", "testdata")

const (
	workspaceNS = "cloudspace-workspaces"
	// seedNS is the namespace the tutorial's web backend creates its workspaces in (a constant
	// of its code), served too.
	seedNS = "cloud-ide"
	// legacyUser is who the legacy listener's calls are.
	legacyUser   = "portal"
	operatorNS   = "cloudspace-operator-system"
	tokensSecret = "cloudspace-api-tokens"
)

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) (code int) {
	binary := os.Getenv("E2E_OPERATOR")
	if binary == "" {
		fmt.Fprintln(os.Stderr, "E2E_OPERATOR is not set: run `make test-e2e`, which builds the operator and the cluster's binaries")
		return 1
	}
	work, err := os.MkdirTemp("", "cloudspace-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(pluginCache)
	defer func() {
		if code == 0 {
			os.RemoveAll(work)
		} else {
			fmt.Fprintf(os.Stderr, "e2e: logs kept in %s\n", work)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if cluster, err = framework.StartCluster(ctx, filepath.Join(work, "cluster"), fmt.Sprintf("e2e-%d", os.Getpid())); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := cluster.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: stopping cluster: %v\n", err)
			code = 1
		}
	}()
	if err := setUp(ctx, binary, work); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code = m.Run()
	// A clean exit on SIGTERM is part of what the suite checks.
	if err := operator.Stop(time.Minute); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: operator did not stop cleanly: %v (log: %s)\n", err, operator.LogPath)
		code = 1
	}
	return code
}

// setUp installs the CRDs, starts the operator and waits for its readiness probe.
func setUp(ctx context.Context, binary, work string) error {
	var err error
	if k8sClient, err = client.New(cluster.Config, client.Options{Scheme: framework.Scheme()}); err != nil {
		return fmt.Errorf("creating client: %w", err)
	}
	// The shipped kinds, and Demo, a pure chart kind the operator serves from test/testdata.
	crds := []string{filepath.Join(framework.RepoRoot(), "config", "crd", "bases"), filepath.Join(testdata, "crds", "demos.yaml")}
	if _, err := envtest.InstallCRDs(cluster.Config, envtest.CRDInstallOptions{Paths: crds, ErrorIfPathMissing: true}); err != nil {
		return fmt.Errorf("installing CRDs: %w", err)
	}
	args, err := grpcSetUp(ctx, work)
	if err != nil {
		return err
	}
	hookArgs, err := webhookSetUp(ctx, work)
	if err != nil {
		return err
	}
	args = append(append(args, hookArgs...), "--watches-file="+filepath.Join(testdata, "watches.yaml"))
	operatorBinary, operatorArgs = binary, args
	runs := 0
	start := func(ctx context.Context, extra ...string) error {
		runs++
		log := filepath.Join(work, fmt.Sprintf("operator-%d.log", runs))
		if operator, err = framework.StartOperator(binary, cluster.Kubeconfig, log, append(args[:len(args):len(args)], extra...)...); err != nil {
			return err
		}
		if err := operator.WaitReady(ctx); err != nil {
			return fmt.Errorf("waiting for the operator's readiness probe: %w", err)
		}
		return nil
	}
	restartOperator = func(ctx context.Context, extra ...string) error {
		if err := operator.Stop(time.Minute); err != nil {
			return fmt.Errorf("stopping the operator: %w", err)
		}
		return start(ctx, extra...)
	}
	return start(ctx)
}

// webhookSetUp serves the admission webhooks as make run does: a local CA and certificate in
// work/webhook, the cluster's webhook configurations pointed at 127.0.0.1 with that CA.
func webhookSetUp(ctx context.Context, work string) ([]string, error) {
	port, err := framework.FreePort()
	if err != nil {
		return nil, err
	}
	webhookAddr = fmt.Sprintf("127.0.0.1:%d", port)
	webhookDir = filepath.Join(work, "webhook")
	files, err := devwebhook.Issue(webhookDir, time.Hour)
	if err != nil {
		return nil, err
	}
	ca, err := os.ReadFile(files.CA)
	if err != nil {
		return nil, err
	}
	manifests := filepath.Join(framework.RepoRoot(), "config", "webhook", "manifests.yaml")
	if err := devwebhook.Configure(ctx, k8sClient, manifests, "https://"+webhookAddr, ca); err != nil {
		return nil, err
	}
	return []string{"--webhook-bind-address=" + webhookAddr, "--webhook-cert-dir=" + webhookDir}, nil
}

// grpcSetUp creates the namespaces and the token Secret and a TLS certificate, and returns
// the operator flags that serve the workspace API with them.
func grpcSetUp(ctx context.Context, work string) ([]string, error) {
	for _, ns := range []string{workspaceNS, seedNS, operatorNS} {
		if err := k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return nil, err
		}
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNS, Name: tokensSecret}, StringData: tokens}
	if err := k8sClient.Create(ctx, secret); err != nil {
		return nil, err
	}
	var err error
	if grpcTLS, err = framework.NewTLSFiles(work); err != nil {
		return nil, err
	}
	port, err := framework.FreePort()
	if err != nil {
		return nil, err
	}
	grpcAddr = fmt.Sprintf("127.0.0.1:%d", port)
	if port, err = framework.FreePort(); err != nil {
		return nil, err
	}
	legacyAddr = fmt.Sprintf("127.0.0.1:%d", port)
	return []string{
		"--zap-log-level=debug",
		"--grpc-bind-address=" + grpcAddr,
		"--grpc-tls-cert-file=" + grpcTLS.Cert, "--grpc-tls-key-file=" + grpcTLS.Key,
		"--grpc-token-secret=" + operatorNS + "/" + tokensSecret,
		"--workspace-access-key-secret=" + operatorNS + "/cloudspace-workspace-access-key",
		"--workspace-namespaces=" + workspaceNS + "," + seedNS,
		"--grpc-legacy-bind-address=" + legacyAddr, "--grpc-legacy-user=" + legacyUser,
		"--quota-max-workspaces=3", "--quota-max-running=2", "--grpc-max-wait=2m",
		fmt.Sprintf("--quota-max-watches=%d", e2eMaxWatches), "--quota-max-storage=" + e2eMaxStorage,
		// The suite's few users make more writes a minute than a person would; make abuse checks
		// the default rate.
		"--quota-writes-per-minute=600", "--quota-write-burst=100",
	}, nil
}
