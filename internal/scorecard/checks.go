package scorecard

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/engine"
)

// xPhaseReason marks the status field that says why a phase is what it is: empty when there
// is nothing to explain, so a Ready resource need not fill it in.
const xPhaseReason = "urn:alm:descriptor:io.kubernetes.phase:reason"

// transientStatus are status fields that only hold a value on the way to Ready, by kind.
var transientStatus = map[string][]string{
	// When the current start began: cleared once the IDE runs.
	"Workspace": {"startRequestedAt"},
}

// status decodes obj's observed generation and conditions.
func status(obj *unstructured.Unstructured) (generation int64, conditions []metav1.Condition) {
	var st struct {
		ObservedGeneration int64              `json:"observedGeneration"`
		Conditions         []metav1.Condition `json:"conditions"`
	}
	if m, ok := obj.Object["status"].(map[string]any); ok {
		_ = runtime.DefaultUnstructuredConverter.FromUnstructured(m, &st)
	}
	return st.ObservedGeneration, st.Conditions
}

// IsReady reports whether obj's Ready condition is True for its current generation.
func IsReady(obj *unstructured.Unstructured) bool {
	generation, conditions := status(obj)
	return generation == obj.GetGeneration() && meta.IsStatusConditionTrue(conditions, infrav1alpha1.ConditionReady)
}

// Conditions summarizes obj's conditions for a message: "Ready=False (RenderFailed: ...)".
func Conditions(obj *unstructured.Unstructured) string {
	_, conditions := status(obj)
	if len(conditions) == 0 {
		return "no conditions yet"
	}
	var parts []string
	for _, c := range conditions {
		parts = append(parts, fmt.Sprintf("%s=%s (%s: %s)", c.Type, c.Status, c.Reason, c.Message))
	}
	return strings.Join(parts, "; ")
}

// Child is an object the operator applied for a resource, from its status.inventory.
type Child struct {
	GVK       schema.GroupVersionKind
	Namespace string
	Name      string
}

// Inventory lists the children in obj's status.inventory ("<namespace>_<name>_<group>_<kind>").
func Inventory(obj *unstructured.Unstructured) ([]Child, error) {
	entries, _, err := unstructured.NestedSlice(obj.Object, "status", "inventory", "entries")
	if err != nil {
		return nil, fmt.Errorf("reading status.inventory: %w", err)
	}
	var out []Child
	for _, e := range entries {
		m, _ := e.(map[string]any)
		id, _ := m["id"].(string)
		version, _ := m["v"].(string)
		parts := strings.Split(id, "_")
		if len(parts) != 4 || version == "" {
			return nil, fmt.Errorf("status.inventory has a malformed entry %v", e)
		}
		out = append(out, Child{
			GVK:       schema.GroupVersionKind{Group: parts[2], Version: version, Kind: parts[3]},
			Namespace: parts[0], Name: parts[1],
		})
	}
	return out, nil
}

// childKinds are the distinct kinds of children.
func childKinds(children []Child) []schema.GroupVersionKind {
	var out []schema.GroupVersionKind
	for _, c := range children {
		if !slices.Contains(out, c.GVK) {
			out = append(out, c.GVK)
		}
	}
	return out
}

// Leftover says what an object found after a resource was deleted is to that resource.
type Leftover int

const (
	// Unrelated: not the resource's child.
	Unrelated Leftover = iota
	// Released: a child its reclaim policy kept, handed back by the operator: no owner
	// reference, no managed-by label, the retained-for record naming the deleted resource.
	Released
	// Orphan: a child that should have been deleted with the resource.
	Orphan
)

// Left classifies obj, found after owner was deleted.
func Left(obj, owner *unstructured.Unstructured) Leftover {
	for _, ref := range obj.GetOwnerReferences() {
		if ref.UID == owner.GetUID() {
			return Orphan
		}
	}
	record := obj.GetAnnotations()[engine.AnnotationRetainedFor]
	if !strings.HasSuffix(record, "/"+owner.GetName()+"/"+string(owner.GetUID())) {
		return Unrelated
	}
	if obj.GetLabels()[engine.LabelManagedBy] == engine.ManagedByValue {
		return Orphan // kept, but never released: the operator still claims it
	}
	return Released
}

// unfilledStatus is the status descriptor test: every field a status descriptor of the
// example's kind names holds a value, but for those that only explain a phase or only hold one
// on the way to Ready.
func unfilledStatus(ex Example, live *unstructured.Unstructured) []string {
	var problems []string
	for _, d := range ex.Description.StatusDescriptors {
		if slices.Contains(d.XDescriptors, xPhaseReason) || slices.Contains(transientStatus[ex.Description.Kind], d.Path) {
			continue
		}
		v, found, _ := unstructured.NestedFieldNoCopy(live.Object, append([]string{"status"}, strings.Split(d.Path, ".")...)...)
		if !found || isEmpty(v) {
			problems = append(problems, fmt.Sprintf("status.%s (%s) is not filled in", d.Path, d.DisplayName))
		}
	}
	return problems
}

func isEmpty(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case string:
		return v == ""
	case []any:
		return len(v) == 0
	case map[string]any:
		return len(v) == 0
	}
	return false
}
