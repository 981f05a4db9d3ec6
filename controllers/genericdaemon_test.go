package controllers

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

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
