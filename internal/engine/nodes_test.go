package engine

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func podOn(node string, ready bool) *unstructured.Unstructured {
	status := "False"
	if ready {
		status = "True"
	}
	return &unstructured.Unstructured{Object: map[string]any{"kind": "Pod",
		"spec":   map[string]any{"nodeName": node},
		"status": map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": status}}}}}
}

func deleting(p *unstructured.Unstructured) *unstructured.Unstructured {
	now := metav1.Now()
	p.SetDeletionTimestamp(&now)
	return p
}

func TestNodesOfInterest(t *testing.T) {
	claim := &unstructured.Unstructured{Object: map[string]any{"kind": "PersistentVolumeClaim"}}
	claim.SetAnnotations(map[string]string{SelectedNodeAnnotation: "n3"})
	deployment := &unstructured.Unstructured{Object: map[string]any{"kind": "Deployment"}}
	deployment.SetAnnotations(map[string]string{SelectedNodeAnnotation: "n9"}) // not a claim
	cases := []struct {
		name string
		pods []*unstructured.Unstructured
		want []string
	}{
		{"ready pods need no node", []*unstructured.Unstructured{podOn("n1", true)}, nil},
		{"a pod not ready: its node, once", []*unstructured.Unstructured{podOn("n1", false), podOn("n1", false), podOn("n2", true)}, []string{"n1"}},
		{"an unscheduled pod: its claims' nodes", []*unstructured.Unstructured{podOn("", false)}, []string{"n3"}},
		{"a pod being deleted: its node too", []*unstructured.Unstructured{deleting(podOn("n4", false))}, []string{"n4"}},
	}
	for _, tc := range cases {
		if got := nodesOfInterest(tc.pods, []*unstructured.Unstructured{deployment, claim}); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
