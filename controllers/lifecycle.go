package controllers

import (
	"time"

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
	// For a PodObserver, children also holds the pods of the chart's workloads.
	Status(obj *unstructured.Unstructured, children []*unstructured.Unstructured) (StatusResult, error)

	// Teardown runs when obj is deleted, before the engine deletes the children. It returns the
	// children that must outlive obj; the engine releases those (drops its owner reference and
	// labels) instead of deleting them.
	Teardown(obj *unstructured.Unstructured, children []*unstructured.Unstructured) (keep []*unstructured.Unstructured, err error)
}

// StatusResult is what Lifecycle.Status computed.
type StatusResult struct {
	// Fields are set in the resource's status next to the engine's own.
	Fields map[string]any
	// RequeueAfter, when positive, asks to look again after this long even if nothing changes
	// (for example when a start timeout will expire).
	RequeueAfter time.Duration
	// Progress names the Fields that only count progress (like ready replicas). A status whose
	// only changes are in these fields and in condition messages is written at most once per
	// status interval, so that a rollout does not cost a write per step.
	Progress []string
}

// PodObserver is implemented by lifecycles whose status needs the pods that the chart's
// workloads run (for a node name or an address). The chart must label those pods with
// app.kubernetes.io/managed-by: cloudspace-operator, app.kubernetes.io/name: <chart name> and
// app.kubernetes.io/instance: <release name>; pod changes then reconcile the resource.
type PodObserver interface {
	ObservesPods()
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
func (ChartOnly) Status(*unstructured.Unstructured, []*unstructured.Unstructured) (StatusResult, error) {
	return StatusResult{}, nil
}

// Teardown keeps nothing.
func (ChartOnly) Teardown(*unstructured.Unstructured, []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	return nil, nil
}
