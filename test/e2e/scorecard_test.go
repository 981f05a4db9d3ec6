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

// runScorecardTests runs the custom scorecard tests with the scorecard-tests binary as a local
// process on the bundle in bundle/, in a new namespace: one process per group, the groups at
// once, as scorecard's stages run them. It returns every result, each checked to be of the
// test its group named in that place.
func runScorecardTests(t *testing.T, timeout time.Duration, groups ...[]string) []scapiv1alpha3.TestResult {
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
	var results []scapiv1alpha3.TestResult
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, names := range groups {
		wg.Go(func() {
			args := append([]string{"-bundle", filepath.Join(framework.RepoRoot(), "bundle"),
				"-namespace", ns.Name, "-timeout", timeout.String()}, names...)
			cmd := exec.Command(binary, args...)
			cmd.Env = append(os.Environ(), "KUBECONFIG="+cluster.Kubeconfig)
			cmd.Stderr = os.Stderr
			out, err := cmd.Output()
			var status scapiv1alpha3.TestStatus
			if err == nil {
				err = json.Unmarshal(out, &status)
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil || len(status.Results) != len(names) {
				t.Errorf("%v: %v; output:\n%s", names, err, out)
				return
			}
			for i, name := range names {
				if status.Results[i].Name != name {
					t.Errorf("result %d of %v is %s", i, names, status.Results[i].Name)
				}
			}
			results = append(results, status.Results...)
		})
	}
	wg.Wait()
	return results
}

// testNames are the custom tests' names: all in one group, and each in a group of its own.
func testNames() (all []string, each [][]string) {
	for _, test := range scorecard.Tests {
		all = append(all, test.Name)
		each = append(each, []string{test.Name})
	}
	return all, each
}

// TestScorecardCustomTestsPass: the operator's own scorecard tests, run together as the
// bundle's scorecard configuration runs them, pass against the running operator: every
// alm-example becomes Ready, fills in its status and leaves nothing behind.
func TestScorecardCustomTestsPass(t *testing.T) {
	all, _ := testNames()
	results := runScorecardTests(t, 2*time.Minute, all)
	for _, r := range results {
		t.Logf("%s: %s\n%s", r.Name, r.State, r.Log)
		if r.State != scapiv1alpha3.PassState {
			t.Errorf("%s: %s: %v\n%s", r.Name, r.State, r.Errors, r.Log)
		}
	}
	if len(results) != len(all) {
		t.Errorf("%d results, want %d", len(results), len(all))
	}
}

// TestScorecardCustomTestsFailOnABrokenKind: with GenericDaemon served from a chart that does
// not render, every custom test fails, and says which examples and why, run alone or with the
// others (both at once: each run names its examples apart).
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
	all, each := testNames()
	results := runScorecardTests(t, 15*time.Second, append(each, all)...)
	for _, r := range results {
		errs := strings.Join(r.Errors, "\n")
		if r.State != scapiv1alpha3.FailState || !strings.Contains(errs, "GenericDaemon workspace-image-prepuller-") ||
			!strings.Contains(errs, "RenderFailed") || !strings.Contains(errs, "broken on purpose") {
			t.Errorf("%s: %s, errors:\n%s\nwant fail naming the GenericDaemons and RenderFailed", r.Name, r.State, errs)
		}
		if strings.Contains(errs, "Workspace") || strings.Contains(errs, "VirtualMachine") {
			t.Errorf("%s: the kinds that work failed too:\n%s", r.Name, errs)
		}
	}
	if len(results) != 2*len(all) {
		t.Errorf("%d results, want %d", len(results), 2*len(all))
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
