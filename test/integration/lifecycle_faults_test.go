package integration

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
)

// unservedLabel takes a Demo out of test/testdata/watches.yaml's selector.
const unservedLabel = "test.cloudspace.dev/unserved"

func createDemo(t *testing.T, ns, name string, spec map[string]any) *demoRef {
	t.Helper()
	demo := newDemo(ns, name, spec)
	if err := k8sClient.Create(context.Background(), demo); err != nil {
		t.Fatal(err)
	}
	eventually(t, timeout, func() error {
		return hasCondition(demo, infrav1alpha1.ConditionReady, metav1.ConditionTrue, infrav1alpha1.ReasonReconciled)
	})
	return &demoRef{demo.GetNamespace(), demo.GetName(), demo}
}

// demoRef is a Demo created and reconciled by a test.
type demoRef struct {
	ns, name string
	obj      client.Object
}

func (d *demoRef) patch(t *testing.T, patch string) {
	t.Helper()
	if err := k8sClient.Patch(context.Background(), d.obj, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
}

// TestResourceLeavingTheSelectorIsStillTornDown: a Demo relabelled out of the selector is no
// longer reconciled (and forgotten: its children leave the kind's gauge), but its deletion
// still runs the teardown it was promised by our finalizer, instead of hanging in Terminating.
func TestResourceLeavingTheSelectorIsStillTornDown(t *testing.T) {
	ns := newNamespace(t)
	d := createDemo(t, ns, "leaver", map[string]any{"greeting": "hi"})
	before := demoChildren()
	if before < 2 {
		t.Fatalf("cloudspace_children{kind=Demo} is %v with a reconciled Demo of two children", before)
	}
	d.patch(t, fmt.Sprintf(`{"metadata":{"labels":{%q:"true"}}}`, unservedLabel))
	eventually(t, timeout, func() error {
		// Nothing else adds Demo children meanwhile: the suite's tests run one at a time.
		if now := demoChildren(); now > before-2 {
			return fmt.Errorf("the resource is still counted after leaving the selector: %v children, %v before", now, before)
		}
		return nil
	})
	if err := k8sClient.Delete(context.Background(), d.obj); err != nil {
		t.Fatal(err)
	}
	for _, obj := range []client.Object{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "leaver-config"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "leaver"}},
		d.obj,
	} {
		eventually(t, timeout, func() error { return gone(obj) })
	}
}

// demoChildren is the cloudspace_children gauge of the Demo kind.
func demoChildren() float64 {
	families, _ := metrics.Registry.Gather()
	for _, f := range families {
		if f.GetName() != "cloudspace_children" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "kind" && l.GetValue() == "Demo" {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return 0
}

// TestFinalizerRemovedByHandIsPutBack: without our finalizer a delete would skip the
// teardown (a retained volume could be lost), so the operator puts it back.
func TestFinalizerRemovedByHandIsPutBack(t *testing.T) {
	ns := newNamespace(t)
	d := createDemo(t, ns, "unfinalized", map[string]any{"greeting": "hi"})
	d.patch(t, `{"metadata":{"finalizers":null}}`)
	eventually(t, timeout, func() error {
		if err := get(d.obj); err != nil {
			return err
		}
		if !slices.Contains(d.obj.GetFinalizers(), infrav1alpha1.Finalizer) {
			return fmt.Errorf("finalizers = %v, want %s back", d.obj.GetFinalizers(), infrav1alpha1.Finalizer)
		}
		return nil
	})
}

// TestDeletionHeldByAnotherFinalizerReportsDeleting: once our teardown is done but another
// finalizer still holds the resource, a reconcile reports Deleting, not "0 children are ready".
func TestDeletionHeldByAnotherFinalizerReportsDeleting(t *testing.T) {
	const hold = "test.cloudspace.dev/hold"
	ns := newNamespace(t)
	d := createDemo(t, ns, "held", map[string]any{"greeting": "hi"})
	d.patch(t, fmt.Sprintf(`{"metadata":{"finalizers":[%q,%q]}}`, infrav1alpha1.Finalizer, hold))
	if err := k8sClient.Delete(context.Background(), d.obj); err != nil {
		t.Fatal(err)
	}
	eventually(t, timeout, func() error {
		if err := get(d.obj); err != nil {
			return err
		}
		if slices.Contains(d.obj.GetFinalizers(), infrav1alpha1.Finalizer) {
			return fmt.Errorf("teardown not finished: finalizers %v", d.obj.GetFinalizers())
		}
		return nil
	})
	// A spec change makes the next reconcile observable: its conditions carry the generation.
	d.patch(t, `{"spec":{"greeting":"still here"}}`)
	u := newDemo(ns, "held", nil)
	eventually(t, timeout, func() error {
		if err := get(u); err != nil {
			return err
		}
		if c := condition(u, infrav1alpha1.ConditionReady); c == nil || c.ObservedGeneration != u.GetGeneration() {
			return fmt.Errorf("Ready = %+v, not yet at generation %d", c, u.GetGeneration())
		}
		return nil
	})
	if c := condition(u, infrav1alpha1.ConditionReady); c.Status != metav1.ConditionFalse || c.Reason != infrav1alpha1.ReasonDeleting {
		t.Errorf("Ready = %s/%s %q while being deleted, want False/%s", c.Status, c.Reason, c.Message, infrav1alpha1.ReasonDeleting)
	}
	d.patch(t, `{"metadata":{"finalizers":null}}`)
	eventually(t, timeout, func() error { return gone(d.obj) })
}

// TestUpgradeRendersWithIsUpgrade: a resource's first generation renders as an install at every
// reconcile, so its children are not rewritten once they were applied; a spec change renders
// as an upgrade.
func TestUpgradeRendersWithIsUpgrade(t *testing.T) {
	ns := newNamespace(t)
	d := createDemo(t, ns, "upgraded", map[string]any{"greeting": "hi"})
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "upgraded-config"}}
	upgrade := func(want, greeting string) func() error {
		return func() error {
			if err := get(cm); err != nil {
				return err
			}
			if cm.Data["upgrade"] != want || cm.Data["greeting"] != greeting {
				return fmt.Errorf("rendered upgrade %q greeting %q, want %q %q", cm.Data["upgrade"], cm.Data["greeting"], want, greeting)
			}
			return nil
		}
	}
	eventually(t, timeout, upgrade("false", "hi"))
	version := cm.ResourceVersion
	d.patch(t, `{"metadata":{"annotations":{"test.cloudspace.dev/poke":"1"}}}`) // a reconcile, same generation
	consistently(t, 2*time.Second, func() error {
		if err := get(cm); err != nil {
			return err
		}
		if cm.ResourceVersion != version {
			return fmt.Errorf("the ConfigMap was rewritten at the same generation: upgrade %q", cm.Data["upgrade"])
		}
		return nil
	})
	d.patch(t, `{"spec":{"greeting":"hello again"}}`)
	eventually(t, timeout, upgrade("true", "hello again"))
}
