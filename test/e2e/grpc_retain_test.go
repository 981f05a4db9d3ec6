package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/pkg/workspacev1"
)

// TestRetainedVolumeNameIsRefusedToAnotherUser: once bob's workspace is deleted with its
// volume kept, alice cannot create a workspace of that name (AlreadyExists, without saying
// whose the volume is), and bob can, getting his volume back.
func TestRetainedVolumeNameIsRefusedToAnotherUser(t *testing.T) {
	api := workspacev1.NewWorkspaceServiceClient(apiConn(t))
	const name = "kept-proj"
	create := func(user string) error {
		_, err := api.Create(as(t, user, time.Minute), &workspacev1.CreateWorkspaceRequest{Workspace: &workspacev1.Workspace{Name: name, RetainStorage: true}})
		return err
	}
	if err := create("bob"); err != nil {
		t.Fatal(err)
	}
	pvc := &corev1.PersistentVolumeClaim{}
	pvcKey := client.ObjectKey{Namespace: workspaceNS, Name: name + "-home"}
	waitFor(t, time.Minute, "bob's volume", func(ctx context.Context) error { return k8sClient.Get(ctx, pvcKey, pvc) })
	if _, err := api.Delete(as(t, "bob", time.Minute), &workspacev1.WorkspaceRef{Name: name}); err != nil {
		t.Fatal(err)
	}
	ws := &infrav1alpha1.Workspace{}
	ws.Namespace, ws.Name = workspaceNS, name
	waitFor(t, time.Minute, "bob's workspace gone", func(ctx context.Context) error { return absent(ctx, ws) })
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), pvc) })

	err := create("alice")
	wantCode(t, err, codes.AlreadyExists, name)
	if strings.Contains(status.Convert(err).Message(), "bob") {
		t.Errorf("the refusal %q tells alice whose the volume is", status.Convert(err).Message())
	}
	if err := create("bob"); err != nil {
		t.Fatalf("bob cannot have his workspace back: %v", err)
	}
	t.Cleanup(func() { _, _ = api.Delete(as(t, "bob", time.Minute), &workspacev1.WorkspaceRef{Name: name}) })
}
