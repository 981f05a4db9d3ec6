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
)

func TestWorkspaceLimits(t *testing.T) {
	q := func(s string) *resource.Quantity { return ptr.To(resource.MustParse(s)) }
	tight := WorkspaceLimits{CPU: resource.MustParse("2")}
	cases := []struct {
		name   string
		limits WorkspaceLimits
		spec   infrav1alpha1.WorkspaceSpec
		field  string
	}{
		{"within the defaults", WorkspaceLimits{}, infrav1alpha1.WorkspaceSpec{Resources: infrav1alpha1.WorkspaceResources{CPU: q("8"), Memory: q("32Gi")}}, ""},
		{"unset fields", WorkspaceLimits{}, infrav1alpha1.WorkspaceSpec{}, ""},
		{"cpu over the default", WorkspaceLimits{}, infrav1alpha1.WorkspaceSpec{Resources: infrav1alpha1.WorkspaceResources{CPU: q("8500m")}}, "spec.resources.cpu"},
		{"storage over the default", WorkspaceLimits{}, infrav1alpha1.WorkspaceSpec{Storage: infrav1alpha1.WorkspaceStorage{Size: q("1Ti")}}, "spec.storage.size"},
		{"cpu over a set limit", tight, infrav1alpha1.WorkspaceSpec{Resources: infrav1alpha1.WorkspaceResources{CPU: q("3")}}, "spec.resources.cpu"},
		{"memory under its default beside a set cpu limit", tight, infrav1alpha1.WorkspaceSpec{Resources: infrav1alpha1.WorkspaceResources{Memory: q("16Gi")}}, ""},
		{"storage beyond any limit, refused without comparing", WorkspaceLimits{}, infrav1alpha1.WorkspaceSpec{Storage: infrav1alpha1.WorkspaceStorage{Size: q("1e999999999")}}, "spec.storage.size"},
	}
	for _, tc := range cases {
		err := tc.limits.Check(&tc.spec)
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("%s: %v, want within limits", tc.name, err)
		case tc.field != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.field+":")):
			t.Errorf("%s: %v, want an error naming %s", tc.name, err, tc.field)
		}
	}
}

// TestWorkspaceLimitsCountTheDefaults: a field left unset renders as its default, so a limit
// below the default refuses it (the CRD fills the same default in on create).
func TestWorkspaceLimitsCountTheDefaults(t *testing.T) {
	low := WorkspaceLimits{Memory: resource.MustParse("1Gi")}
	if err := low.Check(&infrav1alpha1.WorkspaceSpec{}); err == nil || !strings.HasPrefix(err.Error(), "spec.resources.memory:") {
		t.Errorf("no memory (2Gi by default) under a 1Gi limit: %v, want spec.resources.memory refused", err)
	}
}

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
	l := WorkspaceLifecycle{WorkspaceConfig: WorkspaceConfig{Limits: WorkspaceLimits{Memory: resource.MustParse("2Gi")}, AccessKey: make([]byte, 32)}}
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
