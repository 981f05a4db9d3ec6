package objcache

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// TestAPodNobodyHoldsKeepsItsStatusAndCreation: a workload's pod is kept for its status, with
// its creation time, which its start's phases are measured from; its spec and the rest of its
// metadata go.
func TestAPodNobodyHoldsKeepsItsStatusAndCreation(t *testing.T) {
	created := metav1.Date(2026, 11, 28, 3, 44, 31, 0, time.UTC)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "ide-1", Namespace: "team", CreationTimestamp: created,
			Labels: map[string]string{labelManagedBy: managedByValue, "user": "anything"}, Annotations: map[string]string{"note": "x"}},
		Spec:   corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "ide", Image: "ide:1"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1"},
	}
	out, err := Trim{Labels: []string{labelManagedBy}}.Transform(func(client.Object) bool { return false })(pod)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*corev1.Pod)
	if !got.CreationTimestamp.Equal(&created) {
		t.Errorf("creationTimestamp %v, want %v", got.CreationTimestamp, created)
	}
	if got.Status.PodIP != "10.0.0.1" || got.Spec.NodeName != "node-1" || len(got.Spec.Containers) > 0 || got.Labels["user"] != "" || !Trimmed(got) {
		t.Errorf("kept in part: %+v", got)
	}
}
