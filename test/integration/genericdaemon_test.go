package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
)

func newGenericDaemon(t *testing.T, ns, name string, spec infrav1alpha1.GenericDaemonSpec) *infrav1alpha1.GenericDaemon {
	t.Helper()
	gd := &infrav1alpha1.GenericDaemon{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}
	if err := k8sClient.Create(context.Background(), gd); err != nil {
		t.Fatal(err)
	}
	return gd
}

func daemonSetImage(ds *appsv1.DaemonSet) string {
	return ds.Spec.Template.Spec.Containers[0].Image
}

// TestGenericDaemonLifecycle walks one GenericDaemon through create, spec change, a child
// edited by hand, a child deleted by hand, and delete.
func TestGenericDaemonLifecycle(t *testing.T) {
	ns := newNamespace(t)
	gd := newGenericDaemon(t, ns, "syslog", infrav1alpha1.GenericDaemonSpec{Image: "syslog:1", Label: "logs"})
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "syslog"}}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "syslog"}}

	t.Run("create applies the children", func(t *testing.T) {
		eventually(t, timeout, func() error { return get(ds) })
		if err := get(sa); err != nil {
			t.Fatal(err)
		}
		assertOwnedAndApplied(t, ds, gd.UID)
		assertOwnedAndApplied(t, sa, gd.UID)
		terms := ds.Spec.Template.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
		if expr := terms[0].MatchExpressions[0]; expr.Key != "logs" || expr.Operator != corev1.NodeSelectorOpExists {
			t.Errorf("node affinity = %+v, want logs Exists", expr)
		}
		if daemonSetImage(ds) != "syslog:1" {
			t.Errorf("image = %s", daemonSetImage(ds))
		}
	})

	t.Run("spec change updates the child", func(t *testing.T) {
		patch := []byte(`{"spec":{"image":"syslog:2","label":"logs=true"}}`)
		if err := k8sClient.Patch(context.Background(), gd, client.RawPatch(types.MergePatchType, patch)); err != nil {
			t.Fatal(err)
		}
		eventually(t, timeout, func() error {
			if err := get(ds); err != nil {
				return err
			}
			if daemonSetImage(ds) != "syslog:2" || ds.Spec.Template.Spec.NodeSelector["logs"] != "true" {
				return fmt.Errorf("image %s, nodeSelector %v; want syslog:2 and logs=true", daemonSetImage(ds), ds.Spec.Template.Spec.NodeSelector)
			}
			return nil
		})
	})

	t.Run("a child edited by hand is restored", func(t *testing.T) {
		ds.Spec.Template.Spec.Containers[0].Image = "tampered:latest"
		if err := k8sClient.Update(context.Background(), ds, client.FieldOwner("kubectl-edit")); err != nil {
			t.Fatal(err)
		}
		eventually(t, timeout, func() error {
			if err := get(ds); err != nil {
				return err
			}
			if daemonSetImage(ds) != "syslog:2" {
				return fmt.Errorf("image is still %s", daemonSetImage(ds))
			}
			return nil
		})
	})

	t.Run("a child deleted by hand is recreated", func(t *testing.T) {
		oldUID := sa.UID
		if err := k8sClient.Delete(context.Background(), sa); err != nil {
			t.Fatal(err)
		}
		eventually(t, timeout, func() error {
			if err := get(sa); err != nil {
				return err
			}
			if sa.UID == oldUID {
				return fmt.Errorf("still the old ServiceAccount")
			}
			return nil
		})
	})

	t.Run("delete tears the children down", func(t *testing.T) {
		if err := k8sClient.Delete(context.Background(), gd); err != nil {
			t.Fatal(err)
		}
		for _, obj := range []client.Object{ds, sa, gd} {
			eventually(t, timeout, func() error { return gone(obj) })
		}
	})
}

// TestGenericDaemonStatusBeforeNodesReport: with no nodes reporting (envtest runs no
// DaemonSet controller) the daemon is Progressing, not Ready, and counts zero.
func TestGenericDaemonStatusBeforeNodesReport(t *testing.T) {
	ns := newNamespace(t)
	gd := newGenericDaemon(t, ns, "prepull", infrav1alpha1.GenericDaemonSpec{Image: "code-server:4"})
	eventually(t, timeout, func() error {
		if err := get(gd); err != nil {
			return err
		}
		ready := meta.FindStatusCondition(gd.Status.Conditions, infrav1alpha1.ConditionProgressing)
		if ready == nil || ready.Status != metav1.ConditionTrue || gd.Status.ObservedGeneration != gd.Generation {
			return fmt.Errorf("status = %+v, want Progressing at the current generation", gd.Status)
		}
		return nil
	})
	if gd.Status.Installed != 0 || gd.Status.Desired != 0 || gd.Status.Inventory == nil || len(gd.Status.Inventory.Entries) != 2 {
		t.Errorf("status = %+v, want 0/0 and an inventory of 2", gd.Status)
	}
}

// TestAGenericDaemonThatDoesNotDecodeHoldsUpOnlyItself: the CRD's quantity pattern accepts
// "1e1.5", which Go's quantity parser refuses. Such a GenericDaemon is Degraded with
// ValuesInvalid, and one created after it is still served: a cache that decoded the kind into
// its Go type would fail its whole list on the one object and serve neither.
func TestAGenericDaemonThatDoesNotDecodeHoldsUpOnlyItself(t *testing.T) {
	ns := newNamespace(t)
	bad := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"image": "syslog:1", "resources": map[string]any{"limits": map[string]any{"cpu": "1e1.5"}},
	}}}
	bad.SetGroupVersionKind(infrav1alpha1.GroupVersion.WithKind("GenericDaemon"))
	bad.SetNamespace(ns)
	bad.SetName("bad")
	if err := k8sClient.Create(context.Background(), bad); err != nil {
		t.Fatalf("the CRD refused what its pattern accepts: %v", err)
	}
	// Gone before the next test: a typed list of GenericDaemons (the tests' own) fails on it.
	t.Cleanup(func() {
		if err := k8sClient.Delete(context.Background(), bad); err != nil {
			t.Error(err)
		}
		eventually(t, timeout, func() error { return gone(bad) })
	})
	eventually(t, timeout, func() error {
		return hasCondition(bad, infrav1alpha1.ConditionDegraded, metav1.ConditionTrue, infrav1alpha1.ReasonValuesInvalid)
	})
	newGenericDaemon(t, ns, "good", infrav1alpha1.GenericDaemonSpec{Image: "syslog:1"})
	eventually(t, timeout, func() error {
		return get(&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "good"}})
	})
}

// TestAGenericDaemonGetsOnlyWhatItsAuthorMayHave is the attacker's side: a user who may create
// GenericDaemons but not read Secrets asks for another user's workspace Secret in the daemon's
// environment, for every taint (the control plane's too) and for /dev/kvm. With the
// operator's defaults each is refused: Degraded, ValuesInvalid, naming the field, with a
// Warning event; no DaemonSet is written.
func TestAGenericDaemonGetsOnlyWhatItsAuthorMayHave(t *testing.T) {
	ns := newNamespace(t)
	cases := []struct {
		name, field string
		spec        infrav1alpha1.GenericDaemonSpec
	}{
		{"everywhere", "spec.tolerations[0]", infrav1alpha1.GenericDaemonSpec{Image: "x:1", Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}}},
		{"kvm", "spec.resources.limits[devices.kubevirt.io/kvm]", infrav1alpha1.GenericDaemonSpec{Image: "x:1",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"devices.kubevirt.io/kvm": resource.MustParse("1")}}}},
	}
	steal := &infrav1alpha1.GenericDaemon{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "steal"}, Spec: infrav1alpha1.GenericDaemonSpec{Image: "x:1", Env: []corev1.EnvVar{{Name: "P",
		ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "alice-ide-access"}, Key: "password"}}}}}}
	if err := k8sClient.Create(context.Background(), steal); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.env: Invalid value") || !strings.Contains(err.Error(), "secretKeyRef is not allowed") {
		t.Errorf("a daemon reading another's Secret: %v, want the API server to refuse spec.env's secretKeyRef", err)
	}
	for _, tc := range cases {
		gd := newGenericDaemon(t, ns, tc.name, tc.spec)
		u := unstructuredOf(t, gd)
		eventually(t, timeout, func() error {
			return hasCondition(u, infrav1alpha1.ConditionDegraded, metav1.ConditionTrue, infrav1alpha1.ReasonValuesInvalid)
		})
		if msg := condition(u, infrav1alpha1.ConditionDegraded).Message; !strings.Contains(msg, tc.field) {
			t.Errorf("%s: Degraded message %q does not name %s", tc.name, msg, tc.field)
		}
		if err := get(&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tc.name}}); err == nil {
			t.Errorf("%s: a DaemonSet was written", tc.name)
		}
		eventually(t, timeout, func() error { return warningEvent(gd, infrav1alpha1.EventReconcileFailed, tc.field) })
	}
}
