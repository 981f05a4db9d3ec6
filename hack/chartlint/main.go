// Command chartlint lints charts with Helm's own linter (helm.sh/helm/v3/pkg/lint, the version
// the operator renders with), as `helm lint --strict` does: a warning fails like an error. Each
// chart is linted once with each of its ci/*-values.yaml files (once with its own values when it
// has none), as the chart-testing convention has it.
//
// It stands in for the helm binary in make lint-charts: the linter is the same code, and its
// packages are mostly compiled already for the operator, where building helm's whole command
// took two minutes on a cold machine.
//
// Usage: chartlint CHART_DIR...
package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	"sigs.k8s.io/yaml"
)

// namespace is the one helm lint renders in without a kubeconfig naming one.
const namespace = "default"

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: chartlint CHART_DIR...")
		os.Exit(2)
	}
	linted, failed := 0, 0
	for _, chart := range os.Args[1:] {
		runs, err := valuesFiles(chart)
		if err != nil {
			fmt.Fprintln(os.Stderr, "chartlint:", err)
			os.Exit(1)
		}
		for _, values := range runs {
			linted++
			if !lintChart(os.Stdout, chart, values) {
				failed++
			}
		}
	}
	fmt.Printf("%d chart(s) linted, %d chart(s) failed\n", linted, failed)
	if failed > 0 {
		os.Exit(1)
	}
}

// valuesFiles are the chart's ci/*-values.yaml files, or one empty name (its own values only).
func valuesFiles(chart string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(chart, "ci", "*-values.yaml"))
	if err != nil || len(files) == 0 {
		return []string{""}, err
	}
	return files, nil
}

// lintChart lints chart with the values of valuesFile (none when empty), writes what the linter
// says to out as helm lint does, and reports whether it passed: nothing of warning severity or
// above.
func lintChart(out io.Writer, chart, valuesFile string) bool {
	fmt.Fprintf(out, "==> Linting %s", chart)
	if valuesFile != "" {
		fmt.Fprintf(out, " with %s", valuesFile)
	}
	fmt.Fprintln(out)
	defer fmt.Fprintln(out)
	vals, err := readValues(valuesFile)
	if err == nil {
		_, err = os.Stat(filepath.Join(chart, "Chart.yaml"))
	}
	if err != nil {
		fmt.Fprintf(out, "Error %v\n", err)
		return false
	}
	passed := true
	for _, msg := range lint.AllWithKubeVersionAndSchemaValidation(chart, vals, namespace, nil, false).Messages {
		fmt.Fprintln(out, msg.Error())
		passed = passed && msg.Severity < support.WarningSev
	}
	return passed
}

// readValues reads a values file as helm's --values does (an empty name: no values).
func readValues(path string) (map[string]any, error) {
	vals := map[string]any{}
	if path == "" {
		return vals, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if err := yaml.Unmarshal(data, &vals); err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return vals, nil
}
