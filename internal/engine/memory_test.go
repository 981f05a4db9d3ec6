package engine

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
)

func TestRenderMemoGivesBackWhatWasPut(t *testing.T) {
	svc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Service",
		"metadata": map[string]any{"name": "demo", "labels": map[string]any{"app": "demo"}},
		"spec":     map[string]any{"ports": []any{map[string]any{"port": int64(8080), "name": "http"}}, "weight": 0.5},
	}}
	var m renderMemo
	key := types.NamespacedName{Namespace: "ns", Name: "demo"}
	m.put(key, "inputs-1", []*unstructured.Unstructured{svc})

	got, ok := m.get(key, "inputs-1")
	if !ok || len(got) != 1 || !equality.Semantic.DeepEqual(got[0].Object, svc.Object) {
		t.Fatalf("get = %v, %v; want the Service as put (whole numbers as int64)", got, ok)
	}
	got[0].SetName("changed")
	again, _ := m.get(key, "inputs-1")
	if again[0].GetName() != "demo" {
		t.Errorf("a change to what get returned reached the memo: name %q", again[0].GetName())
	}
	if _, ok := m.get(key, "inputs-2"); ok {
		t.Error("get with other inputs found the render")
	}
	m.forget(key)
	if _, ok := m.get(key, "inputs-1"); ok {
		t.Error("get after forget found the render")
	}
}

// TestWriteMemoForgetsAStatusTheCacheHolds: the memo's copy of a written status is dropped once
// the cache holds the object that write returned, and kept while the cache holds an older one,
// even one whose status is equal (a late event must not end the overlay early).
func TestWriteMemoForgetsAStatusTheCacheHolds(t *testing.T) {
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "test/v1", "kind": "Demo",
		"metadata": map[string]any{"namespace": "ns", "name": "d", "uid": "u1"}}}
	st := engineStatus{ObservedGeneration: 2, Inventory: &infrav1alpha1.Inventory{Entries: []infrav1alpha1.InventoryEntry{{ID: "ns_d__ConfigMap", Version: "v1"}}}}
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: "Ready", Status: "True", Reason: "Reconciled", Message: "2 children are ready", LastTransitionTime: metav1.Now()})
	if err := writeStatus(obj, st, map[string]any{"replicas": int64(3)}); err != nil {
		t.Fatal(err)
	}
	written, _, _ := unstructured.NestedFieldCopy(obj.Object, "status")
	obj.SetResourceVersion("12")
	var m writeMemo
	m.record(obj, func(w *lastWrite) { w.status, w.version = written, "12" })

	// An older object with the same status (a write before, equal to this one) is not it.
	older := obj.DeepCopy()
	older.SetResourceVersion("10")
	m.caughtUp(fromJSON(t, older))
	if m.get(obj).status == nil {
		t.Fatal("the memo forgot a status the cache does not hold yet")
	}
	m.caughtUp(fromJSON(t, obj))
	if m.get(obj).status != nil {
		t.Fatal("the memo kept a status the cache holds")
	}
}

// fromJSON is obj as an informer decodes it.
func fromJSON(t *testing.T, obj *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	data, err := obj.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(data); err != nil {
		t.Fatal(err)
	}
	return u
}
