package controllers

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/workspace"
)

// overLimit is a workspace of generation 2 asking for 4Gi of memory, whose status says that
// the operator rendered generation observed; the operator now allows 2Gi.
func overLimit(t *testing.T, running bool, observed int64) (WorkspaceLifecycle, *unstructured.Unstructured) {
	t.Helper()
	ws := &infrav1alpha1.Workspace{
		ObjectMeta: metav1.ObjectMeta{Name: "big", Namespace: "ides", Generation: 2},
		Spec: infrav1alpha1.WorkspaceSpec{Owner: "alice", Running: ptr.To(running),
			Resources: infrav1alpha1.WorkspaceResources{Memory: ptr.To(resource.MustParse("4Gi"))}},
		Status: infrav1alpha1.WorkspaceStatus{ObservedGeneration: observed, Phase: infrav1alpha1.WorkspaceRunning},
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ws)
	if err != nil {
		t.Fatal(err)
	}
	l := WorkspaceLifecycle{WorkspaceConfig: WorkspaceConfig{Limits: workspace.Limits{Memory: resource.MustParse("2Gi")}, AccessKey: make([]byte, 32)}}
	return l, &unstructured.Unstructured{Object: m}
}

// TestOverALoweredLimitAStopStillStops: the admin lowered the memory limit below a running
// workspace. Its owner's stop renders (replicas 0): a stopped IDE takes no memory. A start
// at the old size does not render; the spec it already runs at renders as it is, so that its
// status stays true.
func TestOverALoweredLimitAStopStillStops(t *testing.T) {
	l, stop := overLimit(t, false, 1)
	vals, err := l.Values(stop)
	if err != nil || vals["running"] != false {
		t.Errorf("a stop over the memory limit: running %v, %v; want rendered with running false", vals["running"], err)
	}
	l, start := overLimit(t, true, 1)
	if _, err := l.Values(start); err == nil || !strings.HasPrefix(err.Error(), "spec.resources.memory:") {
		t.Errorf("a start over the memory limit: %v, want spec.resources.memory refused", err)
	}
	l, running := overLimit(t, true, 2)
	if vals, err := l.Values(running); err != nil || vals["running"] != true {
		t.Errorf("the generation already rendered: running %v, %v; want rendered as it is", vals["running"], err)
	}
	// The generation was observed as refused (Stalled, for GitOps tools), not rendered: a
	// later reconcile refuses it again instead of rendering it.
	l, refused := overLimit(t, true, 2)
	stalled := []any{map[string]any{"type": infrav1alpha1.ConditionStalled, "status": "True", "reason": infrav1alpha1.ReasonValuesInvalid,
		"message": "spec.resources.memory: too much", "lastTransitionTime": "2026-11-25T00:00:00Z"}}
	if err := unstructured.SetNestedSlice(refused.Object, stalled, "status", "conditions"); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Values(refused); err == nil || !strings.HasPrefix(err.Error(), "spec.resources.memory:") {
		t.Errorf("a start refused before, observed: %v, want spec.resources.memory refused again", err)
	}
}

// TestAStoppedWorkspaceKeepsItsStorageLimit: a stopped workspace still holds its volume, so
// rendering one over the storage limit would allocate it: it does not render.
func TestAStoppedWorkspaceKeepsItsStorageLimit(t *testing.T) {
	l, stop := overLimit(t, false, 1)
	l.Limits.Storage = resource.MustParse("5Gi")
	if err := unstructured.SetNestedField(stop.Object, "100Gi", "spec", "storage", "size"); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Values(stop); err == nil || !strings.HasPrefix(err.Error(), "spec.storage.size:") {
		t.Errorf("a stopped workspace over the storage limit: %v, want spec.storage.size refused", err)
	}
}
