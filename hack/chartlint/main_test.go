package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLintChart(t *testing.T) {
	const chartYAML = "apiVersion: v2\nname: demo\nversion: 0.1.0\n"
	// The ConfigMap's name is .Values.name, or demo.
	const configMap = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Values.name | default \"demo\" }}\n"
	chart := func(template string) map[string]string {
		return map[string]string{"Chart.yaml": chartYAML, "values.yaml": "", "templates/cm.yaml": template}
	}
	tests := []struct {
		name   string
		files  map[string]string
		values string // the ci values file's content, none when empty
		pass   bool
		want   []string // in the output
	}{
		{name: "a clean chart passes", files: chart(configMap), pass: true, want: []string{"[INFO] Chart.yaml: icon is recommended"}},
		{name: "a warning fails, as with --strict", files: chart(strings.Replace(configMap, "demo", "Bad_Name", 1)), want: []string{"[WARNING] templates/cm.yaml"}},
		{name: "an error fails", files: chart("{{ .Values.name"), want: []string{"[ERROR] templates/"}},
		{name: "the ci values file is used", files: chart(configMap), values: "name: Bad_Name\n", want: []string{filepath.Join("ci", "lint-values.yaml"), "[WARNING] templates/cm.yaml"}},
		{name: "no Chart.yaml fails", files: map[string]string{"values.yaml": ""}, want: []string{"Error"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			chart := t.TempDir()
			if tc.values != "" {
				tc.files["ci/lint-values.yaml"] = tc.values
			}
			for name, content := range tc.files {
				path := filepath.Join(chart, name)
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			runs, err := valuesFiles(chart)
			if err != nil || len(runs) != 1 {
				t.Fatalf("values files %q (%v), want one run", runs, err)
			}
			var out strings.Builder
			if got := lintChart(&out, chart, runs[0]); got != tc.pass {
				t.Errorf("passed %t, want %t; the linter said:\n%s", got, tc.pass, out.String())
			}
			for _, want := range tc.want {
				if !strings.Contains(out.String(), want) {
					t.Errorf("the output does not say %q:\n%s", want, out.String())
				}
			}
		})
	}
}

// TestChartsLintClean lints the operator's own charts, as make lint-charts does.
func TestChartsLintClean(t *testing.T) {
	charts, err := filepath.Glob("../../helm-charts/*/Chart.yaml")
	if err != nil || len(charts) < 3 {
		t.Fatalf("charts %q (%v), want the three", charts, err)
	}
	for _, c := range charts {
		dir := filepath.Dir(c)
		runs, err := valuesFiles(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, values := range runs {
			var out strings.Builder
			if !lintChart(&out, dir, values) {
				t.Errorf("%s with %q:\n%s", dir, values, out.String())
			}
		}
	}
}
