package engine

import (
	"encoding/json"
	"fmt"
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

// TestRenderMemoKeepsRendersSmall: the memo holds one render per resource, so what it keeps
// of each is bounded: renders of one chart, compressed against the first, take a small part of
// their JSON. Each is still given back whole.
func TestRenderMemoKeepsRendersSmall(t *testing.T) {
	var m renderMemo
	const n = 200
	plain, kept := 0, 0
	for i := range n {
		owner := &unstructured.Unstructured{}
		owner.SetAPIVersion("demo.cloudspace.dev/v1alpha1")
		owner.SetKind("Demo")
		owner.SetName(fmt.Sprintf("demo-%05d", i))
		owner.SetUID(types.UID(fmt.Sprintf("8a3c1f0e-2b4d-4e6f-9a1b-%012d", i)))
		objs := []*unstructured.Unstructured{
			{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{"name": owner.GetName() + "-config", "namespace": "bench-scale"},
				"data":     map[string]any{"greeting": "hello", "kubeVersion": "v1.34.1", "upgrade": "false"}}},
			{Object: map[string]any{"apiVersion": "v1", "kind": "Service",
				"metadata": map[string]any{"name": owner.GetName(), "namespace": "bench-scale"},
				"spec": map[string]any{"selector": map[string]any{"app": owner.GetName()},
					"ports": []any{map[string]any{"name": "http", "port": int64(8080)}}}}},
		}
		for _, o := range objs {
			if err := decorate(o, owner, "demo", "0.1.0", false); err != nil {
				t.Fatal(err)
			}
		}
		data, err := json.Marshal(objs)
		if err != nil {
			t.Fatal(err)
		}
		key := types.NamespacedName{Namespace: "bench-scale", Name: owner.GetName()}
		m.put(key, "inputs", objs)
		got, ok := m.get(key, "inputs")
		if !ok || !equality.Semantic.DeepEqual(got[0].Object, objs[0].Object) || !equality.Semantic.DeepEqual(got[1].Object, objs[1].Object) {
			t.Fatalf("render %d: get = %v, %v; want what was put", i, got, ok)
		}
		plain += len(data)
		kept += len(m.m[key].objects)
	}
	t.Logf("%d renders: %d bytes of JSON, %d kept (%.0f per render)", n, plain, kept, float64(kept)/n)
	if kept*10 > plain {
		t.Errorf("the memo keeps %d bytes for %d bytes of renders; want at most a tenth", kept, plain)
	}
}

func BenchmarkRenderMemoPutGet(b *testing.B) {
	var m renderMemo
	objs := []*unstructured.Unstructured{{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "demo-config", "namespace": "bench-scale"},
		"data":     map[string]any{"greeting": "hello"}}}}
	key := types.NamespacedName{Namespace: "bench-scale", Name: "demo"}
	for b.Loop() {
		m.put(key, "inputs", objs)
		if _, ok := m.get(key, "inputs"); !ok {
			b.Fatal("not found")
		}
	}
}
