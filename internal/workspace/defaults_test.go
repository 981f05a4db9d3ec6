package workspace

import (
	"fmt"
	"os"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// TestDefaultsAgreeWithTheCRDAndTheChart: a Workspace's defaults are written three times, as
// Go constants (for workspaces stored before a default existed), as CRD markers (filled in on
// create) and in the chart's values.yaml; all three say the same.
func TestDefaultsAgreeWithTheCRDAndTheChart(t *testing.T) {
	crd := readCRDDefaults(t, "../../config/crd/bases/infra.cloudspace.dev_workspaces.yaml")
	var values map[string]any
	readYAML(t, "../../helm-charts/workspace/values.yaml", &values)
	chart := func(path ...string) string {
		var v any = values
		for _, p := range path {
			m, _ := v.(map[string]any)
			v = m[p]
		}
		return fmt.Sprint(v)
	}
	for _, tc := range []struct {
		field, want, crd, chart string
	}{
		{"image", DefaultImage, crd["image"], chart("image")},
		{"port", fmt.Sprint(DefaultPort), crd["port"], chart("port")},
		{"resources.cpu", DefaultCPU, crd["resources.cpu"], chart("resources", "cpu")},
		{"resources.memory", DefaultMemory, crd["resources.memory"], chart("resources", "memory")},
		{"storage.size", DefaultStorage, crd["storage.size"], chart("storage", "size")},
		{"startTimeout", DefaultStartTimeout.String(), crd["startTimeout"], DefaultStartTimeout.String()},
	} {
		if tc.field == "startTimeout" {
			d, err := time.ParseDuration(tc.crd)
			if err != nil || d != DefaultStartTimeout {
				t.Errorf("spec.startTimeout: CRD default %q, Go %s", tc.crd, DefaultStartTimeout)
			}
			continue
		}
		if tc.crd != tc.want || tc.chart != tc.want {
			t.Errorf("spec.%s: Go %q, CRD %q, chart %q", tc.field, tc.want, tc.crd, tc.chart)
		}
	}
}

// readCRDDefaults is the default of every field of the CRD's spec, by dotted path.
func readCRDDefaults(t *testing.T, path string) map[string]string {
	var crd apiextensionsv1.CustomResourceDefinition
	readYAML(t, path, &crd)
	out := map[string]string{}
	var walk func(prefix string, props map[string]apiextensionsv1.JSONSchemaProps)
	walk = func(prefix string, props map[string]apiextensionsv1.JSONSchemaProps) {
		for name, p := range props {
			if p.Default != nil {
				var v any
				if err := yaml.Unmarshal(p.Default.Raw, &v); err != nil {
					t.Fatal(err)
				}
				out[prefix+name] = fmt.Sprint(v)
			}
			walk(prefix+name+".", p.Properties)
		}
	}
	walk("", crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties)
	return out
}

func readYAML(t *testing.T, path string, out any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, out); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
