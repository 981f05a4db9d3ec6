package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	scapiv1alpha3 "github.com/operator-framework/api/pkg/apis/scorecard/v1alpha3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cloudspace-dev/cloudspace-operator/internal/scorecard"
	"github.com/cloudspace-dev/cloudspace-operator/test/framework"
)

// runScorecardTests runs every custom scorecard test at once, as scorecard's parallel stage
// does, with the scorecard-tests binary as a local process on the bundle in bundle/, in a new
// namespace; it returns each test's result by name.
func runScorecardTests(t *testing.T, timeout time.Duration) map[string]scapiv1alpha3.TestResult {
	t.Helper()
	binary := os.Getenv("E2E_SCORECARD_TESTS")
	if binary == "" {
		t.Fatal("E2E_SCORECARD_TESTS is not set: run `make test-e2e`, which builds it")
	}
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "scorecard-"}}
	if err := k8sClient.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), ns) })
	results := map[string]scapiv1alpha3.TestResult{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, test := range scorecard.Tests {
		wg.Go(func() {
			cmd := exec.Command(binary, "-bundle", filepath.Join(framework.RepoRoot(), "bundle"),
				"-namespace", ns.Name, "-timeout", timeout.String(), test.Name)
			cmd.Env = append(os.Environ(), "KUBECONFIG="+cluster.Kubeconfig)
			cmd.Stderr = os.Stderr
			out, err := cmd.Output()
			var status scapiv1alpha3.TestStatus
			if err == nil {
				err = json.Unmarshal(out, &status)
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil || len(status.Results) != 1 {
				t.Errorf("%s: %v; output:\n%s", test.Name, err, out)
				return
			}
			results[test.Name] = status.Results[0]
		})
	}
	wg.Wait()
	return results
}

// TestScorecardCustomTestsPass: the operator's own scorecard tests pass against the running
// operator: every alm-example becomes Ready, fills in its status and leaves nothing behind.
func TestScorecardCustomTestsPass(t *testing.T) {
	for name, r := range runScorecardTests(t, 2*time.Minute) {
		t.Logf("%s: %s\n%s", name, r.State, r.Log)
		if r.State != scapiv1alpha3.PassState {
			t.Errorf("%s: %s: %v\n%s", name, r.State, r.Errors, r.Log)
		}
	}
}

// TestScorecardCustomTestsFailOnABrokenKind: with GenericDaemon served from a chart that does
// not render, every custom test fails, and says which examples and why.
func TestScorecardCustomTestsFailOnABrokenKind(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := restartOperator(ctx, "--watches-file="+brokenWatches(t)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := restartOperator(ctx); err != nil {
			t.Errorf("restarting the operator with its own watches: %v", err)
		}
	})
	results := runScorecardTests(t, 15*time.Second)
	for _, test := range scorecard.Tests {
		r := results[test.Name]
		errs := strings.Join(r.Errors, "\n")
		if r.State != scapiv1alpha3.FailState || !strings.Contains(errs, "GenericDaemon workspace-image-prepuller-") ||
			!strings.Contains(errs, "RenderFailed") || !strings.Contains(errs, "broken on purpose") {
			t.Errorf("%s: %s, errors:\n%s\nwant fail naming the GenericDaemons and RenderFailed", test.Name, r.State, errs)
		}
		if strings.Contains(errs, "Workspace") || strings.Contains(errs, "VirtualMachine") {
			t.Errorf("%s: the kinds that work failed too:\n%s", test.Name, errs)
		}
	}
}

// brokenWatches writes a watches file that serves the shipped kinds from their charts but for
// GenericDaemon, whose chart gains a template that always fails.
func brokenWatches(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	chart := filepath.Join(dir, "genericdaemon")
	if err := os.CopyFS(chart, os.DirFS(filepath.Join(framework.RepoRoot(), "helm-charts", "genericdaemon"))); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(chart, "templates", "broken.yaml"), []byte(`{{ fail "broken on purpose" }}`), 0o644); err != nil {
		t.Fatal(err)
	}
	var watches strings.Builder
	for kind, c := range map[string]string{
		"GenericDaemon":  chart,
		"Workspace":      filepath.Join(framework.RepoRoot(), "helm-charts", "workspace"),
		"VirtualMachine": filepath.Join(framework.RepoRoot(), "helm-charts", "virtualmachine"),
	} {
		fmt.Fprintf(&watches, "- {group: infra.cloudspace.dev, version: v1alpha1, kind: %s, chart: %s}\n", kind, c)
	}
	path := filepath.Join(dir, "watches.yaml")
	if err := os.WriteFile(path, []byte(watches.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
