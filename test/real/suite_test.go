// Package realnode installs and uses the operator on the real cluster (make test-real): a real
// node runs its pods from the images make images built and pushed, OLM installs it the ways
// users do (operator-sdk run bundle, a catalog image as OperatorHub lists it), and scorecard
// runs its tests in pods. hack/test-real.sh starts the cluster and pushes the images first.
package realnode

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cloudspace-dev/cloudspace-operator/test/framework"
	"github.com/cloudspace-dev/cloudspace-operator/test/infra/images"
	"github.com/cloudspace-dev/cloudspace-operator/test/infra/realcluster"
)

var (
	env       map[string]string
	cfg       *rest.Config
	k8sClient client.Client
	clientset *kubernetes.Clientset
	// node dials from inside the node's network namespace: ClusterIPs and pod IPs.
	node realcluster.Dialer
	// built are the images make images pushed, by name.
	built map[string]images.Built
)

func TestMain(m *testing.M) {
	if err := setUp(); err != nil {
		fmt.Fprintf(os.Stderr, "real: %v\nrun `make test-real`: it starts the real cluster and pushes the images first\n", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

func setUp() error {
	var err error
	dir := os.Getenv("REAL_CLUSTER_DIR")
	if dir == "" {
		dir = filepath.Join(framework.RepoRoot(), ".real-cluster")
	}
	if env, err = readEnv(filepath.Join(dir, "env")); err != nil {
		return err
	}
	if built, err = images.ReadJSON(filepath.Join(framework.RepoRoot(), "bin", "images.json")); err != nil {
		return err
	}
	if !strings.HasPrefix(built[images.OperatorRepo+":v"+version()].Ref, env["REGISTRY"]+"/") {
		return fmt.Errorf("bin/images.json names no images in %s: make images did not push them", env["REGISTRY"])
	}
	holder, err := strconv.Atoi(env["REAL_CLUSTER_HOLDER"])
	if err != nil {
		return fmt.Errorf("REAL_CLUSTER_HOLDER: %w", err)
	}
	node = realcluster.Dialer{PID: holder}
	if cfg, err = clientcmd.BuildConfigFromFlags("", env["KUBECONFIG"]); err != nil {
		return err
	}
	framework.Unthrottled(cfg)
	if k8sClient, err = client.New(cfg, client.Options{Scheme: framework.OLMScheme()}); err != nil {
		return err
	}
	clientset, err = kubernetes.NewForConfig(cfg)
	return err
}

// readEnv reads the cluster's sh-sourceable environment (export NAME="value" lines).
func readEnv(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]string{}
	s := bufio.NewScanner(f)
	for s.Scan() {
		name, value, ok := strings.Cut(strings.TrimPrefix(s.Text(), "export "), "=")
		if ok {
			if unquoted, err := strconv.Unquote(value); err == nil {
				value = unquoted
			}
			out[name] = value
		}
	}
	return out, s.Err()
}

func version() string {
	data, _ := os.ReadFile(filepath.Join(framework.RepoRoot(), "VERSION"))
	return strings.TrimSpace(string(data))
}

// ref is the pushed image of that name, by digest.
func ref(t *testing.T, name string) string {
	t.Helper()
	b, ok := built[name]
	if !ok {
		t.Fatalf("image %s was not built (bin/images.json)", name)
	}
	return b.Ref
}

// waitFor is framework.WaitFor, logging how long each wait on the real node took.
func waitFor(t *testing.T, timeout time.Duration, what string, check func(context.Context) error) {
	t.Helper()
	t.Logf("%s: %s", what, framework.WaitFor(t, timeout, what, check).Round(100*time.Millisecond))
}
