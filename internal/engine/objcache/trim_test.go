package objcache

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestAnUnstructuredStubKeepsItsKind: custom resources are cached unstructured.
func TestAnUnstructuredStubKeepsItsKind(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w", "namespace": "team", "labels": map[string]any{labelManagedBy: managedByValue}},
		"spec":     map[string]any{"pad": strings.Repeat("x", 1<<20)},
	}}
	heldByNobody := func(client.Object) bool { return false }
	out, err := Trim{Labels: []string{labelManagedBy}}.Transform(heldByNobody)(u)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*unstructured.Unstructured)
	if got.GetKind() != "Widget" || got.GetAPIVersion() != "example.com/v1" || got.Object["spec"] != nil || !Trimmed(got) {
		t.Errorf("stub: %v", got.Object)
	}
}
