// Package alerts checks the operator's alerting rules (config/prometheus) with promtool, built
// from Prometheus' source into bin/ (make test-alerts), and that each has a runbook and a test.
package alerts

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/cloudspace-dev/cloudspace-operator/test/framework"
)

// groups reads the PrometheusRule and returns its spec (a promtool rule file) and its alerts.
func groups(t *testing.T) ([]byte, []framework.AlertingRule) {
	t.Helper()
	spec, err := framework.AlertRuleFile()
	if err != nil {
		t.Fatal(err)
	}
	rules, err := framework.AlertingRules()
	if err != nil {
		t.Fatal(err)
	}
	if len(rules) == 0 {
		t.Fatal("the PrometheusRule has no alerts")
	}
	return spec, rules
}

// TestRulesPassPromtool: promtool finds the rules valid, and its unit tests
// (config/prometheus/rules_test.yaml) fire each alert on the series that should and on no other.
func TestRulesPassPromtool(t *testing.T) {
	spec, _ := groups(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), spec, 0o644); err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile(filepath.Join(framework.RepoRoot(), "config", "prometheus", "rules_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rules_test.yaml"), tests, 0o644); err != nil {
		t.Fatal(err)
	}
	promtool := filepath.Join(framework.RepoRoot(), "bin", "promtool")
	for _, args := range [][]string{{"check", "rules", "rules.yaml"}, {"test", "rules", "rules_test.yaml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// TestEveryAlertHasARunbookAndATest: each alert links a section of docs/runbooks.md that
// exists, and rules_test.yaml tests it.
func TestEveryAlertHasARunbookAndATest(t *testing.T) {
	_, rules := groups(t)
	root := framework.RepoRoot()
	runbooks, err := os.ReadFile(filepath.Join(root, "docs", "runbooks.md"))
	if err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile(filepath.Join(root, "config", "prometheus", "rules_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rules {
		want := "docs/runbooks.md#" + strings.ToLower(r.Alert)
		if !strings.HasSuffix(r.Annotations["runbook_url"], want) {
			t.Errorf("%s: runbook_url %q, want one ending in %s", r.Alert, r.Annotations["runbook_url"], want)
		}
		if !regexp.MustCompile(`(?m)^## ` + r.Alert + `$`).Match(runbooks) {
			t.Errorf("%s: docs/runbooks.md has no section ## %s", r.Alert, r.Alert)
		}
		if !regexp.MustCompile(`alertname: ` + r.Alert + `\n`).Match(tests) {
			t.Errorf("%s: rules_test.yaml does not test it", r.Alert)
		}
		for _, a := range []string{"summary", "description"} {
			if r.Annotations[a] == "" {
				t.Errorf("%s: no %s", r.Alert, a)
			}
		}
	}
}
