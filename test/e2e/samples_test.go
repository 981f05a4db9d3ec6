package e2e

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/cloudspace-dev/cloudspace-operator/test/framework"
)

// TestSamplesApplyBothWays: the samples directory applies as a directory of manifests
// (kubectl apply -f) and as a kustomization (kubectl apply -k), checked by the API server,
// its CRD schemas and webhooks, without being written.
func TestSamplesApplyBothWays(t *testing.T) {
	ns := newTestNamespace(t)
	kubectl := filepath.Join(framework.RepoRoot(), "bin", "kubectl")
	samples := filepath.Join(framework.RepoRoot(), "config", "samples")
	for _, how := range []string{"-f", "-k"} {
		out, err := exec.Command(kubectl, "--kubeconfig", cluster.Kubeconfig, "apply", "--dry-run=server",
			"-n", ns, how, samples).CombinedOutput()
		if err != nil {
			t.Errorf("kubectl apply %s config/samples/: %v\n%s", how, err, out)
		}
	}
}
