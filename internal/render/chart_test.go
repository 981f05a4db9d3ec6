package render

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chartutil"
)

const demoChart = "../../test/testdata/charts/demo"

func loadDemo(t *testing.T) *Chart {
	t.Helper()
	c, err := Load(demoChart)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestRenderOrderNamespaceAndValues(t *testing.T) {
	c := loadDemo(t)
	caps := chartutil.DefaultCapabilities.Copy()
	caps.KubeVersion = chartutil.KubeVersion{Version: "v1.34.4", Major: "1", Minor: "34"}
	spec := map[string]any{"greeting": "hi", "extra": true}
	objs, err := c.Render(Input{Name: "d1", Namespace: "team-a", Values: spec, Overrides: map[string]string{"port": "9090"}, Capabilities: caps})
	if err != nil {
		t.Fatalf("Render: %v", err)
	}
	var got []string
	for _, o := range objs {
		got = append(got, o.GetKind()+"/"+o.GetName()+"@"+o.GetNamespace())
	}
	want := "ConfigMap/d1-config@team-a ConfigMap/d1-extra@team-a Service/d1@team-a"
	if strings.Join(got, " ") != want {
		t.Errorf("objects = %v, want %s (install order, namespace defaulted)", got, want)
	}
	port := objs[2].Object["spec"].(map[string]any)["ports"].([]any)[0].(map[string]any)["port"]
	if port != int64(9090) {
		t.Errorf("service port = %#v, want the override 9090", port)
	}
	if v := objs[0].Object["data"].(map[string]any)["kubeVersion"]; v != "v1.34.4" {
		t.Errorf("kubeVersion = %v, want the capabilities' v1.34.4", v)
	}
	if _, set := spec["port"]; set {
		t.Error("Render wrote the override into the caller's values")
	}
}

func TestRenderErrors(t *testing.T) {
	c := loadDemo(t)
	cases := []struct {
		name      string
		values    map[string]any
		overrides map[string]string
		wantType  any
		wantMsg   string
	}{
		{"schema: wrong type", map[string]any{"port": "eighty"}, nil, &ValuesError{}, "/port"},
		{"schema: out of range", map[string]any{"port": 70000}, nil, &ValuesError{}, "maximum"},
		{"bad override", nil, map[string]string{"a[": "x"}, &ValuesError{}, "overrideValues a["},
		{"template fail", map[string]any{"fail": "no greeting today"}, nil, &TemplateError{}, "no greeting today"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Render(Input{Name: "d", Namespace: "ns", Values: tc.values, Overrides: tc.overrides})
			if err == nil || !strings.Contains(err.Error(), tc.wantMsg) {
				t.Fatalf("error = %v, want it to contain %q", err, tc.wantMsg)
			}
			switch tc.wantType.(type) {
			case *ValuesError:
				var ve *ValuesError
				if !errors.As(err, &ve) {
					t.Errorf("error is %T, want *ValuesError", err)
				}
			case *TemplateError:
				var te *TemplateError
				if !errors.As(err, &te) {
					t.Errorf("error is %T, want *TemplateError", err)
				}
			}
		})
	}
}

func TestDigestFollowsContent(t *testing.T) {
	dir := t.TempDir()
	copyDir(t, demoChart, dir)
	a, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Load(dir)
	if a.Digest() != b.Digest() {
		t.Fatal("digest differs between two loads of the same files")
	}
	if err := os.WriteFile(filepath.Join(dir, "values.yaml"), []byte("greeting: changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, _ := Load(dir)
	if c.Digest() == a.Digest() {
		t.Error("digest did not change when values.yaml changed")
	}
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.Walk(from, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		if info.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}
