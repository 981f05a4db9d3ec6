// Package render turns a chart and a custom resource's values into the children to apply. It is
// pure: it reads the chart once at load and never talks to a cluster. Helm is used as the
// template engine only; no release is recorded anywhere.
package render

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/mitchellh/copystructure"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
	"helm.sh/helm/v3/pkg/strvals"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// Chart is a loaded chart and the digest of its files.
type Chart struct {
	chart  *chart.Chart
	digest string
}

// Load reads the chart in dir.
func Load(dir string) (*Chart, error) {
	c, err := loader.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("loading chart %s: %w", dir, err)
	}
	return &Chart{chart: c, digest: digest(c)}, nil
}

// Name is the chart's name from Chart.yaml.
func (c *Chart) Name() string { return c.chart.Metadata.Name }

// Version is the chart's version from Chart.yaml.
func (c *Chart) Version() string { return c.chart.Metadata.Version }

// Digest identifies the chart's content: templates, values, schema and metadata.
func (c *Chart) Digest() string { return c.digest }

func digest(c *chart.Chart) string {
	h := sha256.New()
	files := append(slices.Clone(c.Raw), c.Files...)
	slices.SortFunc(files, func(a, b *chart.File) int { return strings.Compare(a.Name, b.Name) })
	for _, f := range files {
		fmt.Fprintf(h, "%s\x00%d\x00", f.Name, len(f.Data))
		h.Write(f.Data)
	}
	for _, dep := range c.Dependencies() {
		io.WriteString(h, digest(dep))
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// Input is what one render takes.
type Input struct {
	// Name and Namespace of the custom resource; they become .Release.Name and .Release.Namespace.
	Name      string
	Namespace string
	// Values from the custom resource's spec, merged over the chart's defaults.
	Values map[string]any
	// Overrides are watches.yaml's overrideValues ("a.b=c" paths), set over Values.
	Overrides map[string]string
	// Capabilities are the cluster's, from discovery; Helm's defaults when nil.
	Capabilities *chartutil.Capabilities
	// IsUpgrade renders .Release.IsUpgrade (and IsInstall as its opposite).
	IsUpgrade bool
}

// ValuesError means the values do not satisfy the chart's values.schema.json.
type ValuesError struct{ Err error }

func (e *ValuesError) Error() string { return "values are invalid: " + e.Err.Error() }
func (e *ValuesError) Unwrap() error { return e.Err }

// TemplateError means a template failed to render or rendered something that is not an object.
type TemplateError struct{ Err error }

func (e *TemplateError) Error() string { return "chart did not render: " + e.Err.Error() }
func (e *TemplateError) Unwrap() error { return e.Err }

// Render merges the values, validates them against the chart's schema and renders the chart.
// The objects come back in Helm's install order, with the namespace defaulted to in.Namespace.
// Errors are a *ValuesError or a *TemplateError; nothing in them depends on a cluster.
func (c *Chart) Render(in Input) ([]*unstructured.Unstructured, error) {
	vals, err := mergeValues(in.Values, in.Overrides)
	if err != nil {
		return nil, &ValuesError{Err: err}
	}
	opts := chartutil.ReleaseOptions{Name: in.Name, Namespace: in.Namespace, IsInstall: !in.IsUpgrade, IsUpgrade: in.IsUpgrade, Revision: 1}
	top, err := chartutil.ToRenderValuesWithSchemaValidation(c.chart, vals, opts, in.Capabilities, true)
	if err != nil {
		return nil, &ValuesError{Err: err}
	}
	if err := chartutil.ValidateAgainstSchema(c.chart, top["Values"].(chartutil.Values)); err != nil {
		return nil, &ValuesError{Err: errors.New(strings.TrimSpace(err.Error()))}
	}
	files, err := engine.Render(c.chart, top)
	if err != nil {
		return nil, &TemplateError{Err: err}
	}
	objs, err := parseManifests(files, in.Namespace)
	if err != nil {
		return nil, &TemplateError{Err: err}
	}
	return objs, nil
}

// mergeValues copies the spec values and sets the overrides over them.
func mergeValues(spec map[string]any, overrides map[string]string) (map[string]any, error) {
	if len(overrides) == 0 {
		return spec, nil
	}
	// The overrides are set in place, so work on a copy to leave the caller's values alone.
	copied, err := copystructure.Copy(spec)
	if err != nil {
		return nil, fmt.Errorf("copying values: %w", err)
	}
	vals, _ := copied.(map[string]any)
	if vals == nil {
		vals = map[string]any{}
	}
	keys := make([]string, 0, len(overrides))
	for k := range overrides {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if err := strvals.ParseInto(k+"="+overrides[k], vals); err != nil {
			return nil, fmt.Errorf("overrideValues %s: %w", k, err)
		}
	}
	return vals, nil
}

// parseManifests sorts the rendered files in install order and decodes each into an object.
func parseManifests(files map[string]string, namespace string) ([]*unstructured.Unstructured, error) {
	// NOTES.txt is text for a person, not a manifest (SortManifests already skips partials).
	for name := range files {
		if strings.HasSuffix(name, "NOTES.txt") {
			delete(files, name)
		}
	}
	hooks, manifests, err := releaseutil.SortManifests(files, nil, releaseutil.InstallOrder)
	if err != nil {
		return nil, err
	}
	if len(hooks) > 0 {
		return nil, fmt.Errorf("%s: Helm hooks are not supported; render the object as a plain manifest", hooks[0].Path)
	}
	out := make([]*unstructured.Unstructured, 0, len(manifests))
	for _, m := range manifests {
		if m.Head.Version == "" || m.Head.Kind == "" || m.Head.Metadata == nil || m.Head.Metadata.Name == "" {
			return nil, fmt.Errorf("%s: every object needs apiVersion, kind and metadata.name", m.Name)
		}
		// The unstructured JSON scheme keeps integers as int64, as in objects read from the API.
		js, err := yaml.YAMLToJSON([]byte(m.Content))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", m.Name, err)
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(js); err != nil {
			return nil, fmt.Errorf("%s: %w", m.Name, err)
		}
		if u.GetNamespace() == "" {
			u.SetNamespace(namespace)
		}
		out = append(out, u)
	}
	return out, nil
}
