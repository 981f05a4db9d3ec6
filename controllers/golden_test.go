package controllers

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chartutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/cloudspace-dev/cloudspace-operator/internal/activity"
	"github.com/cloudspace-dev/cloudspace-operator/internal/engine"
	"github.com/cloudspace-dev/cloudspace-operator/internal/render"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/ (make golden)")

// goldenCaps are fixed capabilities, so golden output does not depend on a cluster.
func goldenCaps() *chartutil.Capabilities {
	caps := chartutil.DefaultCapabilities.Copy()
	caps.KubeVersion = chartutil.KubeVersion{Version: "v1.34.4", Major: "1", Minor: "34"}
	// Discovery lists kinds too; charts test for them.
	caps.APIVersions = append(caps.APIVersions, "networking.k8s.io/v1/Ingress")
	return caps
}

// goldenWorkspaceConfig is a fixed key (the golden files show its passwords; no cluster uses
// it), an admin's ingress annotation, and the operator's namespace, whose manager reads the
// IDEs' activity.
var goldenWorkspaceConfig = WorkspaceConfig{
	AccessKey:          []byte("golden-files-only-access-key-0123456789"),
	IngressAnnotations: map[string]string{"cert-manager.io/cluster-issuer": "letsencrypt"},
	Activity:           activity.New(), OperatorNamespace: "cloudspace-operator-system",
}

// goldenVMConfig is the defaults with the golden key and an activity record: a VM asking for
// an idle timeout renders its launcher's activity endpoint.
func goldenVMConfig() VMConfig {
	cfg := DefaultVMConfig()
	cfg.AccessKey, cfg.Activity, cfg.OperatorNamespace = goldenWorkspaceConfig.AccessKey, activity.New(), goldenWorkspaceConfig.OperatorNamespace
	return cfg
}

// TestGolden renders each CR under testdata/<chart>/ as the engine would for its kind, and
// compares the decorated children with <name>.golden.
func TestGolden(t *testing.T) {
	cases := []struct {
		chart     string
		lifecycle engine.Lifecycle
	}{
		{chart: "genericdaemon", lifecycle: GenericDaemonLifecycle{}},
		{chart: "workspace", lifecycle: WorkspaceLifecycle{WorkspaceConfig: goldenWorkspaceConfig}},
		{chart: "virtualmachine", lifecycle: VirtualMachineLifecycle{VMConfig: goldenVMConfig()}},
	}
	for _, tc := range cases {
		chart, err := render.Load(filepath.Join("..", "helm-charts", tc.chart))
		if err != nil {
			t.Fatal(err)
		}
		inputs, err := filepath.Glob(filepath.Join("testdata", tc.chart, "*.yaml"))
		if err != nil || len(inputs) == 0 {
			t.Fatalf("no golden inputs under testdata/%s (%v): a golden test that compares nothing tests nothing", tc.chart, err)
		}
		for _, in := range inputs {
			t.Run(filepath.Base(in), func(t *testing.T) {
				got := renderGolden(t, chart, tc.lifecycle, in)
				golden := strings.TrimSuffix(in, ".yaml") + ".golden"
				if *update {
					if err := os.WriteFile(golden, got, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				want, err := os.ReadFile(golden)
				if err != nil {
					t.Fatalf("%v (run `make golden` to create it)", err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("%s differs from %s; run `make golden` if the change is intended:\n%s", in, golden, got)
				}
			})
		}
	}
}

// renderChild renders chart for a CR of kind with spec (YAML) as lc would, and decodes the one
// child of out's kind into out.
func renderChild(t *testing.T, chart string, lc engine.Lifecycle, kind, spec string, out runtime.Object) {
	t.Helper()
	for _, o := range renderCR(t, chart, lc, kind, spec) {
		if o.GetKind() == reflect.TypeOf(out).Elem().Name() {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, out); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatalf("chart %s rendered no %s", chart, reflect.TypeOf(out).Elem().Name())
}

// renderCR renders chart for a CR of kind with spec (YAML) as lc would.
func renderCR(t *testing.T, chart string, lc engine.Lifecycle, kind, spec string) []*unstructured.Unstructured {
	t.Helper()
	c, err := render.Load(filepath.Join("..", "helm-charts", chart))
	if err != nil {
		t.Fatal(err)
	}
	cr := &unstructured.Unstructured{}
	doc := "apiVersion: infra.cloudspace.dev/v1alpha1\nkind: " + kind + "\nmetadata: {name: r, namespace: ns, uid: 7a0c1f6e-0000-4000-8000-000000000009}\nspec: " + spec
	if err := yaml.Unmarshal([]byte(doc), &cr.Object); err != nil {
		t.Fatal(err)
	}
	objs, err := engine.Preview(c, lc, cr, goldenCaps())
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func renderGolden(t *testing.T, chart *render.Chart, lc engine.Lifecycle, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cr := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &cr.Object); err != nil {
		t.Fatal(err)
	}
	objs, err := engine.Preview(chart, lc, cr, goldenCaps())
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	for _, o := range objs {
		y, err := yaml.Marshal(o.Object)
		if err != nil {
			t.Fatal(err)
		}
		out.WriteString("---\n")
		out.Write(y)
	}
	return out.Bytes()
}
