package controllers

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
)

// GenericDaemonLifecycle is GenericDaemon's Go code: chart values from the typed spec, and
// status.installed / status.desired from the DaemonSet.
type GenericDaemonLifecycle struct{ ChartOnly }

var _ Lifecycle = GenericDaemonLifecycle{}

// Values maps the spec onto helm-charts/genericdaemon's values.
func (GenericDaemonLifecycle) Values(obj *unstructured.Unstructured) (map[string]any, error) {
	var gd infrav1alpha1.GenericDaemon
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &gd); err != nil {
		return nil, fmt.Errorf("decoding spec: %w", err)
	}
	return runtime.DefaultUnstructuredConverter.ToUnstructured(&gd.Spec)
}

// Status reports the DaemonSet's ready and desired node counts.
func (GenericDaemonLifecycle) Status(_ *unstructured.Unstructured, children []*unstructured.Unstructured) (StatusResult, error) {
	for _, c := range children {
		if c.GroupVersionKind() != appsv1.SchemeGroupVersion.WithKind("DaemonSet") {
			continue
		}
		var ds appsv1.DaemonSet
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(c.Object, &ds); err != nil {
			return StatusResult{}, fmt.Errorf("decoding DaemonSet %s: %w", c.GetName(), err)
		}
		return StatusResult{Fields: map[string]any{
			"installed": int64(ds.Status.NumberReady),
			"desired":   int64(ds.Status.DesiredNumberScheduled),
		}, Progress: []string{"installed", "desired"}}, nil
	}
	return StatusResult{Fields: map[string]any{"installed": int64(0), "desired": int64(0)}}, nil
}

// DefaultLifecycles are the Go lifecycles of the kinds this operator ships.
func DefaultLifecycles() []Option {
	return []Option{
		WithLifecycle(infrav1alpha1.GroupVersion.WithKind("GenericDaemon"), GenericDaemonLifecycle{}),
		WithLifecycle(infrav1alpha1.GroupVersion.WithKind("Workspace"), WorkspaceLifecycle{}),
	}
}
