package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cloudspace-dev/cloudspace-operator/pkg/workspacev1"
)

// TestIDEAccessIsTheOwnersOnly: the owner gets the IDE's password through the API, the same
// one the IDE reads from its Secret; another user gets neither it nor a new one; rotating
// gives a new password that the Secret and the IDE follow, on the same volume.
func TestIDEAccessIsTheOwnersOnly(t *testing.T) {
	api := workspacev1.NewWorkspaceServiceClient(apiConn(t))
	const name = "alice-door"
	ref := &workspacev1.WorkspaceRef{Namespace: workspaceNS, Name: name}
	if _, err := api.Create(as(t, "alice", time.Minute), &workspacev1.CreateWorkspaceRequest{Workspace: &workspacev1.Workspace{Name: name}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = api.Delete(as(t, "alice", time.Minute), ref) })

	got, err := api.GetAccess(as(t, "alice", time.Minute), ref)
	if err != nil || len(got.GetPassword()) < 32 || got.GetRotation() != 0 {
		t.Fatalf("GetAccess = %+v, %v; want a password at rotation 0", got, err)
	}
	secretHolds(t, name, got.GetPassword())
	for _, call := range []func(context.Context, *workspacev1.WorkspaceRef, ...grpc.CallOption) (*workspacev1.WorkspaceAccess, error){api.GetAccess, api.RotateAccess} {
		out, err := call(as(t, "carol", time.Minute), ref)
		// Another user's workspace answers as a missing one does: its name cannot be probed.
		wantCode(t, err, codes.NotFound, "workspace "+name+" not found")
		if out.GetPassword() != "" {
			t.Errorf("carol was handed a password")
		}
	}

	// The Deployment is applied after the access Secret (Helm's install order): wait for it.
	dep := &appsv1.Deployment{}
	waitFor(t, time.Minute, "the IDE's Deployment", func(ctx context.Context) error {
		return k8sClient.Get(ctx, client.ObjectKey{Namespace: workspaceNS, Name: name}, dep)
	})
	pvc := &corev1.PersistentVolumeClaim{}
	pvcKey := client.ObjectKey{Namespace: workspaceNS, Name: name + "-home"}
	waitFor(t, time.Minute, "the volume", func(ctx context.Context) error { return k8sClient.Get(ctx, pvcKey, pvc) })
	rotated, err := api.RotateAccess(as(t, "alice", time.Minute), ref)
	if err != nil || rotated.GetRotation() != 1 || rotated.GetPassword() == got.GetPassword() || len(rotated.GetPassword()) < 32 {
		t.Fatalf("RotateAccess = %+v, %v; want a new password at rotation 1", rotated, err)
	}
	secretHolds(t, name, rotated.GetPassword())
	waitFor(t, time.Minute, "the IDE restarted with the new password", func(ctx context.Context) error {
		now := &appsv1.Deployment{}
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(dep), now); err != nil {
			return err
		}
		if now.Spec.Template.Annotations[accessChecksum] == dep.Spec.Template.Annotations[accessChecksum] {
			return fmt.Errorf("the pod template still carries the old password's checksum")
		}
		return nil
	})
	kept := &corev1.PersistentVolumeClaim{}
	if err := k8sClient.Get(context.Background(), pvcKey, kept); err != nil || kept.UID != pvc.UID {
		t.Errorf("after rotation the volume is %v (%v), want the same volume %s", kept.UID, err, pvc.UID)
	}
}

const accessChecksum = "infra.cloudspace.dev/access-checksum"

// secretHolds waits until the workspace's access Secret holds password.
func secretHolds(t *testing.T, name, password string) {
	t.Helper()
	waitFor(t, time.Minute, "the access Secret to hold the API's password", func(ctx context.Context) error {
		s := &corev1.Secret{}
		if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: workspaceNS, Name: name + "-access"}, s); err != nil {
			return err
		}
		if string(s.Data["password"]) != password {
			return fmt.Errorf("the Secret holds another password")
		}
		return nil
	})
}
