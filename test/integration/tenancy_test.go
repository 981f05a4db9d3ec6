package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/test/framework"
)

// hostWait is how long a workspace may take to get a host its holder gave up: the waiting
// workspace looks again every controllers.DefaultIngressHostRecheck.
const hostWait = 45 * time.Second

// TestAnIngressHostIsHeldByTheWorkspaceThatClaimedItFirst is the attacker's side: mallory, in
// her own namespace, asks for the host alice's workspace is served at. Hers runs without an
// Ingress (Degraded, naming spec.ingress.host and IngressHostConflict) and alice's keeps it;
// once alice's workspace is deleted, mallory's gets the host.
func TestAnIngressHostIsHeldByTheWorkspaceThatClaimedItFirst(t *testing.T) {
	nsA, nsM := newNamespace(t), newNamespace(t)
	host := &infrav1alpha1.WorkspaceIngress{Host: "shared.ide.example.com"}
	alice := newWorkspace(t, nsA, "ide", infrav1alpha1.WorkspaceSpec{Owner: "alice", Ingress: host})
	aliceIngress := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "ide"}}
	eventually(t, timeout, func() error { return get(aliceIngress) })
	// Claims are ordered by creationTimestamp, in whole seconds: mallory's comes a second later.
	eventually(t, 2*time.Second, func() error {
		if time.Since(alice.CreationTimestamp.Time) <= time.Second {
			return fmt.Errorf("still within alice's creation second")
		}
		return nil
	})
	mallory := newWorkspace(t, nsM, "ide", infrav1alpha1.WorkspaceSpec{Owner: "mallory", Ingress: host})
	u := unstructuredOf(t, mallory)
	eventually(t, timeout, func() error {
		if err := hasCondition(u, infrav1alpha1.ConditionDegraded, metav1.ConditionTrue, infrav1alpha1.ReasonIngressHostConflict); err != nil {
			return err
		}
		if msg := condition(u, infrav1alpha1.ConditionDegraded).Message; !strings.Contains(msg, infrav1alpha1.ReasonIngressHostConflict+": spec.ingress.host") {
			return fmt.Errorf("Degraded message %q does not say %s naming spec.ingress.host", msg, infrav1alpha1.ReasonIngressHostConflict)
		}
		return nil
	})
	malloryIngress := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: nsM, Name: "ide"}}
	if err := get(malloryIngress); err == nil {
		t.Fatalf("mallory's workspace got an Ingress for alice's host")
	}
	if err := get(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: nsM, Name: "ide"}}); err != nil {
		t.Errorf("mallory's IDE does not run without its Ingress: %v", err)
	}
	if err := get(aliceIngress); err != nil || aliceIngress.Spec.Rules[0].Host != host.Host {
		t.Errorf("alice's Ingress = %v, %v; want hers kept", aliceIngress.Spec.Rules, err)
	}

	if err := k8sClient.Delete(context.Background(), alice); err != nil {
		t.Fatal(err)
	}
	releaseProtection(t, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "ide-home"}})
	eventually(t, timeout, func() error { return gone(alice) })
	eventually(t, hostWait, func() error { return get(malloryIngress) })
	eventually(t, timeout, func() error {
		return hasCondition(u, infrav1alpha1.ConditionDegraded, metav1.ConditionFalse, infrav1alpha1.ReasonApplying)
	})
}

// TestAnOlderWorkspaceMovedOntoAHeldHostGetsNothing is the attacker's side: mallory's
// workspace is older than alice's, and she moves its host onto the one alice's is served at.
// The host stays alice's, who claimed it first: mallory's is Degraded with IngressHostConflict
// and gets no Ingress for it.
func TestAnOlderWorkspaceMovedOntoAHeldHostGetsNothing(t *testing.T) {
	nsA, nsM := newNamespace(t), newNamespace(t)
	mallory := newWorkspace(t, nsM, "ide", infrav1alpha1.WorkspaceSpec{Owner: "mallory", Ingress: &infrav1alpha1.WorkspaceIngress{Host: "older.ide.example.com"}})
	u := unstructuredOf(t, mallory)
	eventually(t, timeout, func() error { return claims(u, "older.ide.example.com") })
	alice := newWorkspace(t, nsA, "ide", infrav1alpha1.WorkspaceSpec{Owner: "alice", Ingress: &infrav1alpha1.WorkspaceIngress{Host: "held.ide.example.com"}})
	eventually(t, timeout, func() error { return claims(unstructuredOf(t, alice), "held.ide.example.com") })

	if err := get(mallory); err != nil {
		t.Fatal(err)
	}
	mallory.Spec.Ingress.Host = "held.ide.example.com"
	if err := k8sClient.Update(context.Background(), mallory); err != nil {
		t.Fatal(err)
	}
	eventually(t, timeout, func() error {
		return hasCondition(u, infrav1alpha1.ConditionDegraded, metav1.ConditionTrue, infrav1alpha1.ReasonIngressHostConflict)
	})
	if err := get(&networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: nsM, Name: "ide"}}); !apierrors.IsNotFound(err) {
		t.Errorf("mallory's Ingress after the move: %v, want it pruned", err)
	}
	aliceIngress := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "ide"}}
	if err := get(aliceIngress); err != nil || aliceIngress.Spec.Rules[0].Host != "held.ide.example.com" {
		t.Errorf("alice's Ingress = %v, %v; want hers kept", aliceIngress.Spec.Rules, err)
	}
}

// claims reports whether u's status records its claim of host.
func claims(u *unstructured.Unstructured, host string) error {
	if err := get(u); err != nil {
		return err
	}
	claimed, _, _ := unstructured.NestedString(u.Object, "status", "ingressHost")
	since, _, _ := unstructured.NestedString(u.Object, "status", "ingressHostClaimedAt")
	if claimed != host || since == "" {
		return fmt.Errorf("status claims %q since %q, want %q", claimed, since, host)
	}
	return nil
}

// TestTenancyNetworkPoliciesAreAccepted: the egress policies the charts render for a workspace
// and a VM, the workspace API's policy in config/default and the legacy listener's in
// config/legacy-api, are accepted by the API server.
// (No CNI enforces them here: what they allow is tested on the rendered objects, in
// controllers/egress_test.go.)
func TestTenancyNetworkPoliciesAreAccepted(t *testing.T) {
	ns := newNamespace(t)
	newWorkspace(t, ns, "ide", infrav1alpha1.WorkspaceSpec{Owner: "alice"})
	if err := k8sClient.Create(context.Background(), newVM(ns, "vm", map[string]any{"backend": "pod"})); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"ide", "vm"} {
		np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		eventually(t, timeout, func() error {
			if err := get(np); err != nil {
				return err
			}
			if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) || len(np.Spec.Egress) < 2 {
				return fmt.Errorf("NetworkPolicy %s does not bound egress: %+v", name, np.Spec)
			}
			return nil
		})
	}

	for _, file := range []string{"default/grpc_networkpolicy.yaml", "legacy-api/legacy_networkpolicy.yaml"} {
		data, err := os.ReadFile(filepath.Join(framework.RepoRoot(), "config", file))
		if err != nil {
			t.Fatal(err)
		}
		api := &networkingv1.NetworkPolicy{}
		if err := yaml.UnmarshalStrict(data, api); err != nil {
			t.Fatal(err)
		}
		api.Namespace = ns
		if err := k8sClient.Create(context.Background(), api); err != nil {
			t.Fatalf("the API server refuses config/%s: %v", file, err)
		}
	}
}
