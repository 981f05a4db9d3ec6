package watches

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func chartDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "charts", "demo"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "charts", "demo", "Chart.yaml"), []byte("name: demo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestParseValid(t *testing.T) {
	dir := chartDir(t)
	t.Setenv("DEMO_IMAGE", "busybox:1.36")
	data := []byte(`# comment
- group: infra.cloudspace.dev
  version: v1alpha1
  kind: Demo
  chart: charts/demo
  reconcilePeriod: 2m
  maxConcurrentReconciles: 8
  watchDependentResources: false
  overrideValues:
    image: $DEMO_IMAGE
  selector:
    matchLabels:
      tier: dev
- group: infra.cloudspace.dev
  version: v1alpha1
  kind: Other
  chart: charts/demo
`)
	ws, err := Parse(data, dir)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if len(ws) != 2 {
		t.Fatalf("got %d entries, want 2", len(ws))
	}
	w := ws[0]
	if w.Line != 2 || ws[1].Line != 14 {
		t.Errorf("lines = %d, %d; want 2, 14", w.Line, ws[1].Line)
	}
	if w.ReconcilePeriod != 2*time.Minute || w.MaxConcurrentReconciles != 8 || w.WatchesDependents() {
		t.Errorf("entry 0 decoded wrong: %+v", w)
	}
	if got := w.OverrideValues["image"]; got != "busybox:1.36" {
		t.Errorf("override image = %q, want env-expanded busybox:1.36", got)
	}
	if w.Chart != filepath.Join(dir, "charts", "demo") {
		t.Errorf("chart = %q, want it joined to the file's directory", w.Chart)
	}
	sel, err := w.LabelSelector()
	if err != nil || sel.String() != "tier=dev" {
		t.Errorf("selector = %v, %v", sel, err)
	}
	if o := ws[1]; o.MaxConcurrentReconciles != DefaultMaxConcurrentReconciles || !o.WatchesDependents() || o.ReconcilePeriod != 0 {
		t.Errorf("defaults not applied: %+v", o)
	}
}

func TestParseErrorsNameTheLine(t *testing.T) {
	dir := chartDir(t)
	const ok = "- group: g.io\n  version: v1\n  kind: A\n  chart: charts/demo\n"
	cases := []struct {
		name, data, want string
	}{
		{"empty", "", "1: no entries"},
		{"not a list", "group: g.io\n", "1: cannot unmarshal"},
		{"unknown field", ok + "- group: g.io\n  version: v1\n  kind: B\n  chrt: x\n", "8: field chrt not found"},
		{"missing kind", ok + "- group: g.io\n  version: v1\n  chart: charts/demo\n", `5: entry for kind "": kind is required`},
		{"bad duration", ok + "  reconcilePeriod: soon\n", "5: cannot unmarshal !!str `soon` into time.Duration"},
		{"missing chart dir", "- group: g.io\n  version: v1\n  kind: A\n  chart: nope\n", "1: entry for kind \"A\": chart"},
		{"duplicate", ok + ok, "5: g.io/v1, Kind=A is already served by the entry on line 1"},
		{"bad selector", ok + "  selector:\n    matchExpressions: [{key: a, operator: Nope}]\n", "1: entry for kind \"A\": selector:"},
		{"negative concurrency", ok + "  maxConcurrentReconciles: -1\n", "maxConcurrentReconciles -1 must be at least 1"},
		{"syntax", ok + "  kind: [\n", "5: did not find expected node content"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.data), dir)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestLoadPrefixesThePath(t *testing.T) {
	dir := chartDir(t)
	path := filepath.Join(dir, "watches.yaml")
	if err := os.WriteFile(path, []byte("- group: g.io\n  version: v1\n  kind: A\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	if err == nil || !strings.HasPrefix(err.Error(), path+":1: ") {
		t.Fatalf("error = %v, want prefix %q", err, path+":1: ")
	}
}
