package engine

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
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
