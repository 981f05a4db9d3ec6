package framework

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// DemoGVK is the pure chart kind of test/testdata: a ConfigMap and a Service per resource, and
// no Go code of its own.
var DemoGVK = schema.GroupVersionKind{Group: "test.cloudspace.dev", Version: "v1", Kind: "Demo"}

// DemoController is the Demo kind's controller, as the operator's metrics name it.
const DemoController = "demo.test.cloudspace.dev"

// WriteDemoWatches writes a watches.yaml at path that serves Demo alone, from its chart, with
// a selector of matchLabels (none: every Demo).
func WriteDemoWatches(path string, matchLabels map[string]string) error {
	chart := filepath.Join(RepoRoot(), "test", "testdata", "charts", "demo")
	entry := fmt.Sprintf("- group: %s\n  version: %s\n  kind: %s\n  chart: %s\n  overrideValues:\n    port: %q\n",
		DemoGVK.Group, DemoGVK.Version, DemoGVK.Kind, chart, DemoPort)
	if len(matchLabels) > 0 {
		keys := make([]string, 0, len(matchLabels))
		for k := range matchLabels {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var b strings.Builder
		b.WriteString("  selector:\n    matchLabels:\n")
		for _, k := range keys {
			fmt.Fprintf(&b, "      %q: %q\n", k, matchLabels[k])
		}
		entry += b.String()
	}
	return os.WriteFile(path, []byte(entry), 0o644)
}
