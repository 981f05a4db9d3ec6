package controllers

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/engine"
)

// TestKindsRetainTheirVolumesUnderRetain: a Workspace and a VirtualMachine keep their
// PersistentVolumeClaims, and nothing else, when their own reclaim policy field says Retain;
// nothing under Delete or when the field is unset (Delete is the default).
func TestKindsRetainTheirVolumesUnderRetain(t *testing.T) {
	pvc := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "PersistentVolumeClaim"}}
	pod := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Pod"}}
	workspaceWith := func(t *testing.T, policy infrav1alpha1.ReclaimPolicy) *unstructured.Unstructured {
		ws := testWorkspace(false, infrav1alpha1.WorkspaceStatus{})
		ws.Spec.Storage.ReclaimPolicy = policy
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ws)
		if err != nil {
			t.Fatal(err)
		}
		return &unstructured.Unstructured{Object: obj}
	}
	vmWith := func(_ *testing.T, policy infrav1alpha1.ReclaimPolicy) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"disk": map[string]any{"reclaimPolicy": string(policy)}}}}
	}
	for _, kind := range []struct {
		name   string
		lc     engine.Retainer
		object func(*testing.T, infrav1alpha1.ReclaimPolicy) *unstructured.Unstructured
	}{
		{"Workspace", WorkspaceLifecycle{}, workspaceWith},
		{"VirtualMachine", VirtualMachineLifecycle{}, vmWith},
	} {
		for policy, want := range map[infrav1alpha1.ReclaimPolicy]int{infrav1alpha1.ReclaimRetain: 1, infrav1alpha1.ReclaimDelete: 0, "": 0} {
			keep, err := kind.lc.Retain(kind.object(t, policy), []*unstructured.Unstructured{pod, pvc})
			if err != nil || len(keep) != want || (want == 1 && keep[0] != pvc) {
				t.Errorf("%s under %q keeps %v, %v; want %d PersistentVolumeClaim", kind.name, policy, keep, err, want)
			}
		}
	}
}
