package inspect

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func object(name string, mutate func(*unstructured.Unstructured)) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetAPIVersion("infra.cloudspace.dev/v1alpha1")
	u.SetKind("GenericDaemon")
	u.SetName(name)
	if mutate != nil {
		mutate(u)
	}
	return u
}

func TestInventoryParsesEntries(t *testing.T) {
	obj := object("gd", func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedSlice(u.Object, []any{
			map[string]any{"id": "ns_gd_apps_DaemonSet", "v": "v1"},
			map[string]any{"id": "ns_gd__ServiceAccount", "v": "v1"},
		}, "status", "inventory", "entries")
	})
	children, err := Inventory(obj)
	if err != nil {
		t.Fatal(err)
	}
	if len(children) != 2 || children[0].GVK.Group != "apps" || children[0].GVK.Kind != "DaemonSet" ||
		children[1].GVK.Group != "" || children[1].Name != "gd" || children[1].Namespace != "ns" {
		t.Errorf("children = %+v", children)
	}
	bad := object("gd", func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"id": "ns_gd", "v": "v1"}}, "status", "inventory", "entries")
	})
	if _, err := Inventory(bad); err == nil {
		t.Error("a malformed entry was accepted")
	}
}

func TestIsReadyNeedsTheCurrentGeneration(t *testing.T) {
	ready := func(generation, observed int64, status string) *unstructured.Unstructured {
		return object("x", func(u *unstructured.Unstructured) {
			u.SetGeneration(generation)
			u.Object["status"] = map[string]any{
				"observedGeneration": observed,
				"conditions":         []any{map[string]any{"type": "Ready", "status": status, "reason": "R", "message": "m", "lastTransitionTime": "2026-01-01T00:00:00Z"}},
			}
		})
	}
	if !IsReady(ready(2, 2, "True")) {
		t.Error("Ready=True for the current generation is not ready")
	}
	if IsReady(ready(3, 2, "True")) || IsReady(ready(2, 2, "False")) || IsReady(object("x", nil)) {
		t.Error("a stale, false or missing Ready counts as ready")
	}
}

func TestReadyWithoutConditionsIsUnknown(t *testing.T) {
	if c := Ready(object("x", nil)); c.Status != "Unknown" || c.Reason != "NotReconciled" {
		t.Errorf("Ready of a resource never reconciled = %+v", c)
	}
}
