package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/access"
)

const accessChecksum = "infra.cloudspace.dev/access-checksum"

// TestWorkspaceIDERequiresPasswordAndTLS: the IDE asks for the workspace's own password, kept
// in a Secret the workspace owns; its Ingress serves TLS only, with the operator's annotations.
// Raising spec.access.rotation gives a new password and restarts the IDE on the same volume.
func TestWorkspaceIDERequiresPasswordAndTLS(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	ws := newWorkspace(t, ns, "alice-sec", infrav1alpha1.WorkspaceSpec{Owner: "alice",
		Ingress: &infrav1alpha1.WorkspaceIngress{Host: "alice-sec.ide.example.com"}})
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "alice-sec"}}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "alice-sec-access"}}
	ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "alice-sec"}}
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "alice-sec-home"}}
	eventually(t, timeout, phase(ws, infrav1alpha1.WorkspacePending))
	for _, c := range []client.Object{dep, secret, ing, pvc} {
		if err := get(c); err != nil {
			t.Fatalf("child %T %s: %v", c, c.GetName(), err)
		}
		assertOwnedAndApplied(t, c, ws.UID)
	}
	if got, want := string(secret.Data["password"]), access.Password(accessKey, ws.UID, 0); got != want {
		t.Errorf("the access Secret holds %q, want the password derived for this workspace", got)
	}
	ide := dep.Spec.Template.Spec.Containers[0]
	if i := slices.Index(ide.Args, "--auth"); i < 0 || i+1 >= len(ide.Args) || ide.Args[i+1] != "password" {
		t.Errorf("IDE args %v: want --auth password", ide.Args)
	}
	if !slices.ContainsFunc(ide.Env, func(e corev1.EnvVar) bool {
		return e.Name == "PASSWORD" && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil &&
			e.ValueFrom.SecretKeyRef.Name == secret.Name && e.ValueFrom.SecretKeyRef.Key == "password"
	}) {
		t.Errorf("IDE env %v: want PASSWORD from %s", ide.Env, secret.Name)
	}
	if len(ing.Spec.TLS) != 1 || ing.Spec.TLS[0].SecretName != "alice-sec-tls" || !slices.Equal(ing.Spec.TLS[0].Hosts, []string{"alice-sec.ide.example.com"}) {
		t.Errorf("ingress TLS %+v: want the host with Secret alice-sec-tls", ing.Spec.TLS)
	}
	if ing.Annotations["cert-manager.io/cluster-issuer"] != "test-issuer" {
		t.Errorf("ingress annotations %v: want the operator's issuer", ing.Annotations)
	}

	before, pvcUID := dep.Spec.Template.Annotations[accessChecksum], pvc.UID
	patch := []byte(`{"spec":{"access":{"rotation":1}}}`)
	if err := k8sClient.Patch(ctx, ws, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	eventually(t, timeout, func() error {
		if err := get(secret); err != nil {
			return err
		}
		if string(secret.Data["password"]) != access.Password(accessKey, ws.UID, 1) {
			return fmt.Errorf("the Secret still holds the rotation-0 password")
		}
		if err := get(dep); err != nil {
			return err
		}
		if dep.Spec.Template.Annotations[accessChecksum] == before {
			return fmt.Errorf("the pod template did not change: the IDE would keep the old password")
		}
		return nil
	})
	if err := get(pvc); err != nil || pvc.UID != pvcUID || !pvc.DeletionTimestamp.IsZero() {
		t.Fatalf("rotating the password touched the volume: %v", err)
	}
}

// TestWorkspaceAccessSchema: the rotation never goes back (an old password would return), and a
// Workspace author cannot set the IDE's login through spec.env.
func TestWorkspaceAccessSchema(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	ws := newWorkspace(t, ns, "rot", infrav1alpha1.WorkspaceSpec{Owner: "alice", Access: infrav1alpha1.WorkspaceAccess{Rotation: 2}})
	err := k8sClient.Patch(ctx, ws, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"access":{"rotation":1}}}`)))
	if err == nil || !strings.Contains(err.Error(), "spec.access.rotation") || !strings.Contains(err.Error(), "only increase") {
		t.Errorf("lowering the rotation: %v, want refused naming spec.access.rotation", err)
	}
	for _, name := range []string{"PASSWORD", "HASHED_PASSWORD"} {
		bad := &infrav1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: strings.ToLower(strings.ReplaceAll(name, "_", "-"))},
			Spec: infrav1alpha1.WorkspaceSpec{Owner: "alice", Env: []corev1.EnvVar{{Name: name, Value: "hunter2"}}}}
		err := k8sClient.Create(ctx, bad)
		if err == nil || !strings.Contains(err.Error(), "spec.env") {
			t.Errorf("env %s: %v, want refused naming spec.env", name, err)
		}
	}
}
