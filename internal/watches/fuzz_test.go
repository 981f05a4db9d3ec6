package watches

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// FuzzLoad loads arbitrary watches files, next to a chart at charts/demo. Nothing panics; a
// file loads into entries that the engine can serve as they are, or is refused with an error
// that names the file and, wherever yaml says where, the line.
func FuzzLoad(f *testing.F) {
	if data, err := os.ReadFile("../../watches.yaml"); err == nil {
		f.Add(data) // the operator's own: its charts are not next to the fuzzed file
	}
	f.Add([]byte("- group: g.io\n  version: v1\n  kind: A\n  chart: charts/demo\n"))
	f.Add([]byte("- {group: g.io, version: v1, kind: A, chart: charts/demo, reconcilePeriod: 1m, maxConcurrentReconciles: 2}\n" +
		"- group: g.io\n  version: v1\n  kind: B\n  chart: charts/demo\n  watchDependentResources: false\n" +
		"  overrideValues: {image: $HOME}\n  selector: {matchLabels: {tier: dev}, matchExpressions: [{key: a, operator: In, values: [x]}]}\n"))
	// One directory for every input: Load only reads it, and a worker runs one input at a time.
	path := filepath.Join(chartDir(f), "watches.yaml")
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		ws, err := Load(path)
		if err != nil {
			checkLoadError(t, path, err)
			return
		}
		checkLoaded(t, data, ws)
	})
}

// loadError is how Load refuses: the file, then the line, or yaml's own message for what yaml
// reports without a position (a byte that is not UTF-8, a control character, an error on the
// first line, which yaml.v3 leaves unnumbered).
var loadError = regexp.MustCompile(`^(\d+|yaml): \S`)

func checkLoadError(t *testing.T, path string, err error) {
	t.Helper()
	rest, ok := strings.CutPrefix(err.Error(), path+":")
	if !ok || !loadError.MatchString(rest) {
		t.Fatalf("error %q does not name the file %s and a line", err, path)
	}
}

// checkLoaded checks what the engine relies on in loaded entries: the fields it needs, the
// defaults filled, a chart that exists, a selector that parses, each kind served once, and
// each entry's line in the file, in order.
func checkLoaded(t *testing.T, data []byte, ws []Watch) {
	t.Helper()
	if len(ws) == 0 {
		t.Fatal("loaded no entries and no error")
	}
	lines := bytes.Count(data, []byte("\n")) + 1
	seen := map[schema.GroupVersionKind]bool{}
	for i, w := range ws {
		if w.Group == "" || w.Version == "" || w.Kind == "" || !filepath.IsAbs(w.Chart) {
			t.Fatalf("entry %d lacks a field or an absolute chart path: %+v", i, w)
		}
		if _, err := os.Stat(filepath.Join(w.Chart, "Chart.yaml")); err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		if w.MaxConcurrentReconciles < 1 || w.ReconcilePeriod < 0 {
			t.Fatalf("entry %d: concurrency %d, period %s", i, w.MaxConcurrentReconciles, w.ReconcilePeriod)
		}
		if _, err := w.LabelSelector(); err != nil {
			t.Fatalf("entry %d: selector: %v", i, err)
		}
		if seen[w.GroupVersionKind()] {
			t.Fatalf("entry %d: %s served twice", i, w.GroupVersionKind())
		}
		seen[w.GroupVersionKind()] = true
		if w.Line < 1 || w.Line > lines || i > 0 && w.Line < ws[i-1].Line {
			t.Fatalf("entry %d: line %d of %d, after %d", i, w.Line, lines, ws[max(i-1, 0)].Line)
		}
	}
}
