// Package inspect reads, from outside the operator, what its engine writes on a resource of any
// kind it serves (pure chart kinds included): the Ready condition and the generation it was
// observed for, and the inventory of children. The kubectl plugin, the scorecard tests and the
// OLM test read resources through it.
package inspect

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
)

// status is the part of a resource's status the engine writes on every kind.
type status struct {
	ObservedGeneration int64                    `json:"observedGeneration"`
	Conditions         []metav1.Condition       `json:"conditions"`
	Inventory          *infrav1alpha1.Inventory `json:"inventory"`
}

func read(obj *unstructured.Unstructured) status {
	var st status
	if m, ok := obj.Object["status"].(map[string]any); ok {
		_ = runtime.DefaultUnstructuredConverter.FromUnstructured(m, &st)
	}
	return st
}

// Ready is obj's Ready condition, or an Unknown one (reason NotReconciled) when it has none yet.
func Ready(obj *unstructured.Unstructured) metav1.Condition {
	if c := meta.FindStatusCondition(read(obj).Conditions, infrav1alpha1.ConditionReady); c != nil {
		return *c
	}
	return metav1.Condition{Type: infrav1alpha1.ConditionReady, Status: metav1.ConditionUnknown,
		Reason: "NotReconciled", Message: "no Ready condition yet"}
}

// IsReady reports whether obj's Ready condition is True for its current generation.
func IsReady(obj *unstructured.Unstructured) bool {
	st := read(obj)
	return st.ObservedGeneration == obj.GetGeneration() && meta.IsStatusConditionTrue(st.Conditions, infrav1alpha1.ConditionReady)
}

// Conditions summarizes obj's conditions for a message: "Ready=False (RenderFailed: ...)".
func Conditions(obj *unstructured.Unstructured) string {
	conditions := read(obj).Conditions
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

// Inventory lists the children in obj's status.inventory, in apply order.
func Inventory(obj *unstructured.Unstructured) ([]Child, error) {
	inv := read(obj).Inventory
	if inv == nil {
		return nil, nil
	}
	out := make([]Child, 0, len(inv.Entries))
	for _, e := range inv.Entries {
		gvk, namespace, name, err := e.Object()
		if err != nil {
			return nil, fmt.Errorf("reading status.inventory: %w", err)
		}
		out = append(out, Child{GVK: gvk, Namespace: namespace, Name: name})
	}
	return out, nil
}
