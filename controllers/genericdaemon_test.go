package controllers

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/cloudspace-dev/cloudspace-operator/internal/engine"
)

func TestGenericDaemonStatus(t *testing.T) {
	ds := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "DaemonSet",
		"status": map[string]any{"desiredNumberScheduled": int64(3), "numberReady": int64(2)}}}
	sa := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ServiceAccount"}}
	res, err := GenericDaemonLifecycle{}.Status(nil, engine.Observed{Children: []*unstructured.Unstructured{sa, ds}})
	got := res.Fields
	if err != nil || got["installed"] != int64(2) || got["desired"] != int64(3) {
		t.Errorf("status = %v, %v; want installed 2, desired 3", got, err)
	}
	res, _ = GenericDaemonLifecycle{}.Status(nil, engine.Observed{Children: []*unstructured.Unstructured{sa}})
	if got = res.Fields; got["installed"] != int64(0) {
		t.Errorf("without a DaemonSet: %v, want zero counts", got)
	}
}

// A DaemonSet whose pods cannot pull their image only ever says "not ready": the daemon's
// status must name the image and the reason.
func TestGenericDaemonStatusNamesAnUnpullableImage(t *testing.T) {
	pod := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "d-x7k2p"}, Status: corev1.PodStatus{Phase: corev1.PodPending,
		ContainerStatuses: []corev1.ContainerStatus{{Name: "daemon", Image: "reg/missing:1",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "not found"}}}}}}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&pod)
	if err != nil {
		t.Fatal(err)
	}
	res, err := GenericDaemonLifecycle{}.Status(nil, engine.Observed{Pods: []*unstructured.Unstructured{{Object: u}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"d-x7k2p", `"reg/missing:1"`, "ImagePullBackOff", "not found"} {
		if !strings.Contains(res.Failure, want) {
			t.Errorf("failure %q lacks %q", res.Failure, want)
		}
	}
}

func TestGenericDaemonValues(t *testing.T) {
	cr := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "infra.cloudspace.dev/v1alpha1", "kind": "GenericDaemon",
		"spec": map[string]any{"image": "x:1", "label": "logs=true", "resources": map[string]any{"limits": map[string]any{"cpu": "0.5"}}},
	}}
	v, err := GenericDaemonLifecycle{}.Values(cr)
	if err != nil {
		t.Fatal(err)
	}
	if v["image"] != "x:1" || v["label"] != "logs=true" {
		t.Errorf("values = %v", v)
	}
	// Quantities leave the typed spec in canonical form, as the API server stores them.
	cpu, _, _ := unstructured.NestedString(v, "resources", "limits", "cpu")
	if cpu != "500m" {
		t.Errorf("cpu = %q, want canonical 500m", cpu)
	}
	cr.Object["spec"] = "not an object"
	if _, err := (GenericDaemonLifecycle{}).Values(cr); err == nil {
		t.Error("an undecodable spec was accepted")
	}
}
