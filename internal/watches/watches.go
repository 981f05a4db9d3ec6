// Package watches loads watches.yaml: the map from each kind the operator serves to the Helm
// chart that renders its children. The schema is the Helm operator's, so a file written for
// operator-sdk's Helm or hybrid operators loads unchanged.
package watches

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// DefaultMaxConcurrentReconciles is used when an entry does not set maxConcurrentReconciles.
// Reconciles wait on the API server far more than they compute, so this is well above the
// core count.
const DefaultMaxConcurrentReconciles = 16

// Watch is one entry of watches.yaml.
type Watch struct {
	// Group, Version and Kind name the custom resource served by this entry.
	Group   string `yaml:"group"`
	Version string `yaml:"version"`
	Kind    string `yaml:"kind"`
	// Chart is the chart directory; a relative path is taken from the watches file's directory.
	Chart string `yaml:"chart"`
	// ReconcilePeriod, when set, re-queues every CR after this long. Zero (the default) leaves
	// drift correction to the watches on the children, which is cheaper and faster.
	ReconcilePeriod time.Duration `yaml:"reconcilePeriod,omitempty"`
	// MaxConcurrentReconciles is how many CRs of this kind are reconciled at once.
	MaxConcurrentReconciles int `yaml:"maxConcurrentReconciles,omitempty"`
	// WatchDependentResources, true by default, watches every child kind to undo drift at once.
	WatchDependentResources *bool `yaml:"watchDependentResources,omitempty"`
	// OverrideValues are set over the CR's values; "$VAR" and "${VAR}" expand from the environment.
	OverrideValues map[string]string `yaml:"overrideValues,omitempty"`
	// Selector, when set, limits the entry to CRs whose labels match.
	Selector *Selector `yaml:"selector,omitempty"`

	// Line is the line of watches.yaml the entry starts on, for error messages.
	Line int `yaml:"-"`
}

// Selector is a label selector as written in watches.yaml (metav1.LabelSelector's fields).
type Selector struct {
	MatchLabels      map[string]string     `yaml:"matchLabels,omitempty"`
	MatchExpressions []SelectorRequirement `yaml:"matchExpressions,omitempty"`
}

// SelectorRequirement is one matchExpressions entry.
type SelectorRequirement struct {
	Key      string   `yaml:"key"`
	Operator string   `yaml:"operator"`
	Values   []string `yaml:"values,omitempty"`
}

// GroupVersionKind is the kind this entry serves.
func (w Watch) GroupVersionKind() schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: w.Group, Version: w.Version, Kind: w.Kind}
}

// WatchesDependents reports whether child kinds are watched (the default).
func (w Watch) WatchesDependents() bool {
	return w.WatchDependentResources == nil || *w.WatchDependentResources
}

// LabelSelector is the entry's selector as a labels.Selector; Everything when unset.
func (w Watch) LabelSelector() (labels.Selector, error) {
	if w.Selector == nil {
		return labels.Everything(), nil
	}
	ls := &metav1.LabelSelector{MatchLabels: w.Selector.MatchLabels}
	for _, r := range w.Selector.MatchExpressions {
		ls.MatchExpressions = append(ls.MatchExpressions, metav1.LabelSelectorRequirement{
			Key: r.Key, Operator: metav1.LabelSelectorOperator(r.Operator), Values: r.Values,
		})
	}
	return metav1.LabelSelectorAsSelector(ls)
}

// Load reads and validates a watches file. Every error names the file and the line.
func Load(path string) ([]Watch, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading watches file: %w", err)
	}
	ws, err := Parse(data, filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("%s:%w", path, err)
	}
	return ws, nil
}

// Parse decodes and validates watches.yaml content; relative chart paths are joined to baseDir.
// Errors start with the line number ("12: ...").
func Parse(data []byte, baseDir string) ([]Watch, error) {
	var ws []Watch
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&ws); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("1: no entries: the file must be a list of watches")
		}
		return nil, lineError(err)
	}
	// The typed decode has no positions; the node tree gives each entry's line.
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, lineError(err)
	}
	entries := doc.Content[0].Content
	seen := map[schema.GroupVersionKind]int{}
	for i := range ws {
		w := &ws[i]
		w.Line = entries[i].Line
		if err := w.validate(baseDir); err != nil {
			return nil, fmt.Errorf("%d: entry for kind %q: %w", w.Line, w.Kind, err)
		}
		if first, dup := seen[w.GroupVersionKind()]; dup {
			return nil, fmt.Errorf("%d: %s is already served by the entry on line %d", w.Line, w.GroupVersionKind(), first)
		}
		seen[w.GroupVersionKind()] = w.Line
	}
	if len(ws) == 0 {
		return nil, errors.New("1: no entries: the file must be a list of watches")
	}
	return ws, nil
}

func (w *Watch) validate(baseDir string) error {
	required := []struct{ field, value string }{
		{"group", w.Group}, {"version", w.Version}, {"kind", w.Kind}, {"chart", w.Chart},
	}
	for _, r := range required {
		if r.value == "" {
			return fmt.Errorf("%s is required", r.field)
		}
	}
	if w.ReconcilePeriod < 0 {
		return fmt.Errorf("reconcilePeriod %s must not be negative", w.ReconcilePeriod)
	}
	if w.MaxConcurrentReconciles < 0 {
		return fmt.Errorf("maxConcurrentReconciles %d must be at least 1", w.MaxConcurrentReconciles)
	}
	if w.MaxConcurrentReconciles == 0 {
		w.MaxConcurrentReconciles = DefaultMaxConcurrentReconciles
	}
	if _, err := w.LabelSelector(); err != nil {
		return fmt.Errorf("selector: %w", err)
	}
	if !filepath.IsAbs(w.Chart) {
		w.Chart = filepath.Join(baseDir, w.Chart)
	}
	if _, err := os.Stat(filepath.Join(w.Chart, "Chart.yaml")); err != nil {
		return fmt.Errorf("chart %s: no Chart.yaml: %w", w.Chart, err)
	}
	for k, v := range w.OverrideValues {
		w.OverrideValues[k] = os.ExpandEnv(v)
	}
	return nil
}

// yamlLine matches the "line N: " that yaml puts before each message; the message may quote
// a value over several lines.
var yamlLine = regexp.MustCompile(`(?s)^(?:yaml: )?line (\d+): (.*)$`)

// lineError turns yaml's messages ("yaml: line N: msg", or a TypeError's list) into "N: msg".
func lineError(err error) error {
	msgs := []string{err.Error()}
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs = te.Errors
	}
	out := make([]string, 0, len(msgs))
	for _, m := range msgs {
		if g := yamlLine.FindStringSubmatch(m); g != nil {
			m = g[1] + ": " + g[2]
		}
		out = append(out, m)
	}
	return errors.New(strings.Join(out, "; "))
}
