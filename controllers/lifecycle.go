package controllers

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Lifecycle is the Go code a kind registers with the engine. Every method is pure: it computes
// from the custom resource and its children and never writes; the engine does the writing.
// A kind that registers none is a pure chart kind (see ChartOnly).
type Lifecycle interface {
	// Values returns the chart values for obj. An error means the spec can never render; it is
	// reported in the Degraded condition and not retried until the spec changes.
	Values(obj *unstructured.Unstructured) (map[string]any, error)

	// Status returns kind-specific status fields computed from obj and its live children
	// (for example a count of ready nodes). They are written next to the engine's own fields.
	Status(obj *unstructured.Unstructured, children []*unstructured.Unstructured) (map[string]any, error)

	// Teardown runs when obj is deleted, before the engine deletes the children. It returns the
	// children that must outlive obj; the engine releases those (drops its owner reference and
	// labels) instead of deleting them.
	Teardown(obj *unstructured.Unstructured, children []*unstructured.Unstructured) (keep []*unstructured.Unstructured, err error)
}

// ChartOnly is the lifecycle of a kind with no Go code: the chart's values are the CR's spec,
// there are no extra status fields and every child is deleted with the CR.
type ChartOnly struct{}

// Values returns a copy of spec.
func (ChartOnly) Values(obj *unstructured.Unstructured) (map[string]any, error) {
	spec, _, err := unstructured.NestedMap(obj.Object, "spec")
	return spec, err
}

// Status adds nothing.
func (ChartOnly) Status(*unstructured.Unstructured, []*unstructured.Unstructured) (map[string]any, error) {
	return nil, nil
}

// Teardown keeps nothing.
func (ChartOnly) Teardown(*unstructured.Unstructured, []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	return nil, nil
}
