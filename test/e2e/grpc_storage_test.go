package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/plugin"
	"github.com/cloudspace-dev/cloudspace-operator/pkg/workspacev1"
)

// e2eMaxStorage is the operator's --quota-max-storage in this suite: room for every other
// test's workspaces at their default size, and a budget erin can reach.
const e2eMaxStorage = "250Gi"

// TestStorageBudgetCountsLiveAndKeptVolumes: erin keeps a 200Gi volume after deleting its
// workspace. List reports it as kept, against her 250Gi budget; 60Gi more is ResourceExhausted
// naming the budget, 40Gi fits, and the plugin's list says what she holds.
func TestStorageBudgetCountsLiveAndKeptVolumes(t *testing.T) {
	api := workspacev1.NewWorkspaceServiceClient(apiConn(t))
	create := func(name, size string, retain bool) error {
		_, err := api.Create(as(t, "erin", time.Minute), &workspacev1.CreateWorkspaceRequest{
			Workspace: &workspacev1.Workspace{Name: name, Storage: size, RetainStorage: retain}})
		return err
	}
	storage := func() *workspacev1.StorageUsage {
		list, err := api.List(as(t, "erin", time.Minute), &workspacev1.ListWorkspacesRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return list.GetStorage()
	}
	const gi = int64(1) << 30
	if err := create("vault", "200Gi", true); err != nil {
		t.Fatal(err)
	}
	if got := storage(); got.GetUsedBytes() != 200*gi || got.GetKeptBytes() != 0 || got.GetBudgetBytes() != 250*gi {
		t.Errorf("erin's storage with her 200Gi workspace: %v", got)
	}
	pvc := &corev1.PersistentVolumeClaim{}
	pvcKey := client.ObjectKey{Namespace: workspaceNS, Name: "vault-home"}
	waitFor(t, time.Minute, "erin's volume", func(ctx context.Context) error { return k8sClient.Get(ctx, pvcKey, pvc) })
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), pvc) })
	if _, err := api.Delete(as(t, "erin", time.Minute), &workspacev1.WorkspaceRef{Name: "vault"}); err != nil {
		t.Fatal(err)
	}
	ws := &infrav1alpha1.Workspace{}
	ws.Namespace, ws.Name = workspaceNS, "vault"
	waitFor(t, time.Minute, "erin's workspace gone", func(ctx context.Context) error { return absent(ctx, ws) })
	if got := storage(); got.GetUsedBytes() != 200*gi || got.GetKeptBytes() != 200*gi {
		t.Errorf("erin's storage once her volume is kept: %v, want 200Gi used, all of it kept", got)
	}

	wantCode(t, create("extra", "60Gi", false), codes.ResourceExhausted, "storage budget of 250Gi")
	if err := create("extra", "40Gi", false); err != nil {
		t.Fatalf("40Gi within the budget: %v", err)
	}
	t.Cleanup(func() { _, _ = api.Delete(as(t, "erin", time.Minute), &workspacev1.WorkspaceRef{Name: "extra"}) })
	out, code := kubectlCloudspace(t, wsArgs(t, "erin", "list")...)
	if want := "storage: 240Gi of 250Gi (200Gi kept after delete)"; code != plugin.ExitOK || !strings.Contains(string(out), want) {
		t.Errorf("erin's ws list: exit %d, output\n%s\nwant a line %q", code, out, want)
	}
}
