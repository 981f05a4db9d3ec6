package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/engine"
)

const timeout = 20 * time.Second

// TestPureChartKindReconciles: a kind no Go code knows is served from its chart alone, with
// owner references, our field manager, an inventory and Ready once its children are current.
func TestPureChartKindReconciles(t *testing.T) {
	ns := newNamespace(t)
	demo := newDemo(ns, "hello", map[string]any{"greeting": "hi"})
	if err := k8sClient.Create(context.Background(), demo); err != nil {
		t.Fatal(err)
	}
	eventually(t, timeout, func() error {
		return hasCondition(demo, infrav1alpha1.ConditionReady, metav1.ConditionTrue, infrav1alpha1.ReasonReconciled)
	})

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hello-config"}}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hello"}}
	for _, child := range []client.Object{cm, svc} {
		if err := get(child); err != nil {
			t.Fatalf("child %s: %v", child.GetName(), err)
		}
		assertOwnedAndApplied(t, child, demo.GetUID())
	}
	if cm.Data["greeting"] != "hi" {
		t.Errorf("greeting = %q, want the spec's hi", cm.Data["greeting"])
	}
	if svc.Spec.Ports[0].Port != 8080 {
		t.Errorf("service port = %d, want 8080 from the watches.yaml override", svc.Spec.Ports[0].Port)
	}
	if !strings.HasPrefix(cm.Data["kubeVersion"], "v1.") {
		t.Errorf("kubeVersion = %q, want the server's version from discovery", cm.Data["kubeVersion"])
	}
	entries, _, _ := unstructured.NestedSlice(demo.Object, "status", "inventory", "entries")
	if len(entries) != 2 {
		t.Errorf("inventory = %v, want 2 entries", entries)
	}
	if g, _, _ := unstructured.NestedInt64(demo.Object, "status", "observedGeneration"); g != demo.GetGeneration() {
		t.Errorf("observedGeneration = %d, want %d", g, demo.GetGeneration())
	}
	if !slices.Contains(demo.GetFinalizers(), infrav1alpha1.Finalizer) {
		t.Errorf("finalizers = %v, want %s", demo.GetFinalizers(), infrav1alpha1.Finalizer)
	}
}

// assertOwnedAndApplied checks the controller owner reference, the standard labels and that
// our field manager applied the object.
func assertOwnedAndApplied(t *testing.T, obj client.Object, owner types.UID) {
	t.Helper()
	ref := metav1.GetControllerOf(obj)
	if ref == nil || ref.UID != owner {
		t.Errorf("%s: controller reference = %+v, want owner %s", obj.GetName(), ref, owner)
	}
	if obj.GetLabels()[engine.LabelManagedBy] != engine.ManagedByValue || obj.GetLabels()[engine.LabelInstance] == "" {
		t.Errorf("%s: labels = %v, want managed-by and instance", obj.GetName(), obj.GetLabels())
	}
	for _, mf := range obj.GetManagedFields() {
		if mf.Manager == engine.DefaultFieldManager && mf.Operation == metav1.ManagedFieldsOperationApply {
			return
		}
	}
	t.Errorf("%s: no server-side apply entry for field manager %q in %+v", obj.GetName(), engine.DefaultFieldManager, obj.GetManagedFields())
}

// TestChildNoLongerRenderedIsPruned: turning off a template's condition deletes its object.
func TestChildNoLongerRenderedIsPruned(t *testing.T) {
	ns := newNamespace(t)
	demo := newDemo(ns, "prune", map[string]any{"extra": true})
	if err := k8sClient.Create(context.Background(), demo); err != nil {
		t.Fatal(err)
	}
	extra := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prune-extra"}}
	eventually(t, timeout, func() error { return get(extra) })

	patch := []byte(`{"spec":{"extra":false}}`)
	if err := k8sClient.Patch(context.Background(), demo, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	eventually(t, timeout, func() error { return gone(extra) })
	eventually(t, timeout, func() error {
		if err := get(demo); err != nil {
			return err
		}
		entries, _, _ := unstructured.NestedSlice(demo.Object, "status", "inventory", "entries")
		if len(entries) != 2 {
			return fmt.Errorf("inventory has %d entries, want 2 after the prune", len(entries))
		}
		return nil
	})
	if err := get(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prune-config"}}); err != nil {
		t.Errorf("the still-rendered ConfigMap was touched: %v", err)
	}
}

// TestRenderErrorsWriteNothing: a template failure or a schema violation sets Degraded with the
// reason and the message, and no child is created.
func TestRenderErrorsWriteNothing(t *testing.T) {
	ns := newNamespace(t)
	cases := []struct {
		name, reason, msg string
		spec              map[string]any
	}{
		{"broken", infrav1alpha1.ReasonRenderFailed, "no greeting today", map[string]any{"fail": "no greeting today"}},
		{"invalid", infrav1alpha1.ReasonValuesInvalid, "/greeting", map[string]any{"greeting": ""}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			demo := newDemo(ns, tc.name, tc.spec)
			if err := k8sClient.Create(context.Background(), demo); err != nil {
				t.Fatal(err)
			}
			eventually(t, timeout, func() error {
				return hasCondition(demo, infrav1alpha1.ConditionDegraded, metav1.ConditionTrue, tc.reason)
			})
			if c := condition(demo, infrav1alpha1.ConditionDegraded); !strings.Contains(c.Message, tc.msg) {
				t.Errorf("Degraded message %q does not say %q", c.Message, tc.msg)
			}
			if c := condition(demo, infrav1alpha1.ConditionReady); c.Status != metav1.ConditionFalse {
				t.Errorf("Ready = %s, want False", c.Status)
			}
			var cms corev1.ConfigMapList
			if err := k8sClient.List(context.Background(), &cms, client.InNamespace(ns), client.MatchingLabels{engine.LabelInstance: tc.name}); err != nil {
				t.Fatal(err)
			}
			if len(cms.Items) != 0 {
				t.Errorf("a failed render wrote %d ConfigMaps", len(cms.Items))
			}
		})
	}
}

// TestDeleteTearsDownEvenWithBrokenChart: delete removes every child from the inventory and
// then the finalizer, even when the spec no longer renders.
func TestDeleteTearsDownEvenWithBrokenChart(t *testing.T) {
	ns := newNamespace(t)
	demo := newDemo(ns, "doomed", map[string]any{"extra": true})
	if err := k8sClient.Create(context.Background(), demo); err != nil {
		t.Fatal(err)
	}
	eventually(t, timeout, func() error {
		return hasCondition(demo, infrav1alpha1.ConditionReady, metav1.ConditionTrue, infrav1alpha1.ReasonReconciled)
	})
	patch := []byte(`{"spec":{"fail":"chart broken after install"}}`)
	if err := k8sClient.Patch(context.Background(), demo, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	eventually(t, timeout, func() error {
		return hasCondition(demo, infrav1alpha1.ConditionDegraded, metav1.ConditionTrue, infrav1alpha1.ReasonRenderFailed)
	})

	if err := k8sClient.Delete(context.Background(), demo); err != nil {
		t.Fatal(err)
	}
	// envtest runs no garbage collector: only the operator's teardown can remove the children.
	for _, child := range []client.Object{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "doomed-config"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "doomed-extra"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "doomed"}},
		demo,
	} {
		eventually(t, timeout, func() error { return gone(child) })
	}
}

// TestPausedResourceIsLeftAlone: with the pause annotation, drift is not corrected and the
// conditions say why; removing it resumes.
func TestPausedResourceIsLeftAlone(t *testing.T) {
	ns := newNamespace(t)
	demo := newDemo(ns, "paused", map[string]any{"greeting": "hi"})
	if err := k8sClient.Create(context.Background(), demo); err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "paused-config"}}
	eventually(t, timeout, func() error { return get(cm) })
	setAnnotation(t, demo, infrav1alpha1.PauseAnnotation, "true")
	eventually(t, timeout, func() error {
		return hasCondition(demo, infrav1alpha1.ConditionReady, metav1.ConditionFalse, infrav1alpha1.ReasonPaused)
	})

	if err := k8sClient.Patch(context.Background(), demo, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"greeting":"changed"}}`))); err != nil {
		t.Fatal(err)
	}
	// Once the paused reconcile has seen the new generation, the change must still be held back.
	eventually(t, timeout, func() error {
		if err := get(demo); err != nil {
			return err
		}
		if c := condition(demo, infrav1alpha1.ConditionReady); c.ObservedGeneration != demo.GetGeneration() || c.Reason != infrav1alpha1.ReasonPaused {
			return fmt.Errorf("Ready = %+v, want Paused at generation %d", c, demo.GetGeneration())
		}
		return nil
	})
	if err := get(cm); err != nil || cm.Data["greeting"] != "hi" {
		t.Fatalf("while paused, greeting = %q (%v), want the old hi", cm.Data["greeting"], err)
	}
	setAnnotation(t, demo, infrav1alpha1.PauseAnnotation, "false")
	eventually(t, timeout, func() error {
		if err := get(cm); err != nil {
			return err
		}
		if cm.Data["greeting"] != "changed" {
			return fmt.Errorf("greeting = %q, want changed after resume", cm.Data["greeting"])
		}
		return nil
	})
}

func setAnnotation(t *testing.T, obj client.Object, key, value string) {
	t.Helper()
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, key, value)
	if err := k8sClient.Patch(context.Background(), obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
}
