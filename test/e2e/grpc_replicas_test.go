package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/cloudspace-dev/cloudspace-operator/pkg/workspacev1"
	"github.com/cloudspace-dev/cloudspace-operator/test/framework"
)

// TestQuotaHoldsAcrossTwoReplicas: during a rolling update two API servers run at once. With
// concurrent creates by one user spread over both, no more workspaces run than the quota
// allows (2 in this suite), round after round.
func TestQuotaHoldsAcrossTwoReplicas(t *testing.T) {
	second := startAPIReplica(t)
	apis := []workspacev1.WorkspaceServiceClient{workspacev1.NewWorkspaceServiceClient(apiConn(t)), workspacev1.NewWorkspaceServiceClient(second)}
	for round := range 10 {
		var mu sync.Mutex
		var created []string
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				name := fmt.Sprintf("dave-%d-%d", round, i)
				_, err := apis[i%2].Create(as(t, "dave", time.Minute), &workspacev1.CreateWorkspaceRequest{Workspace: &workspacev1.Workspace{Name: name}})
				if err == nil {
					mu.Lock()
					created = append(created, name)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		for _, name := range created {
			if _, err := apis[0].Delete(as(t, "dave", time.Minute), &workspacev1.WorkspaceRef{Name: name}); err != nil {
				t.Fatal(err)
			}
		}
		if len(created) != 2 {
			t.Fatalf("round %d: %d of 8 concurrent creates over two replicas succeeded (%v), want the quota's 2", round, len(created), created)
		}
	}
}

// startAPIReplica runs a second operator that serves the API on its own port and reconciles
// nothing (its watches select no resource), and returns a connection to it.
func startAPIReplica(t *testing.T) *grpc.ClientConn {
	t.Helper()
	dir := t.TempDir()
	root := framework.RepoRoot()
	watches := fmt.Sprintf(`- {group: infra.cloudspace.dev, version: v1alpha1, kind: Workspace, chart: %s, selector: {matchLabels: {test.cloudspace.dev/replica: none}}}
- {group: infra.cloudspace.dev, version: v1alpha1, kind: GenericDaemon, chart: %s, selector: {matchLabels: {test.cloudspace.dev/replica: none}}}
`, filepath.Join(root, "helm-charts", "workspace"), filepath.Join(root, "helm-charts", "genericdaemon"))
	if err := os.WriteFile(filepath.Join(dir, "watches.yaml"), []byte(watches), 0o644); err != nil {
		t.Fatal(err)
	}
	port, err := framework.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	var args []string
	for _, a := range operatorArgs {
		// The second replica serves the API only: its own gRPC address, no legacy listener, no webhooks.
		if !strings.HasPrefix(a, "--grpc-bind-address=") && !strings.HasPrefix(a, "--grpc-legacy-") && !strings.HasPrefix(a, "--webhook-") {
			args = append(args, a)
		}
	}
	args = append(args, "--grpc-bind-address="+addr, "--watches-file="+filepath.Join(dir, "watches.yaml"))
	replica, err := framework.StartOperator(operatorBinary, cluster.Kubeconfig, filepath.Join(dir, "replica.log"), args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := replica.Stop(time.Minute); err != nil {
			t.Errorf("stopping the second replica: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := replica.WaitReady(ctx); err != nil {
		t.Fatalf("second replica: %v (log %s)", err, replica.LogPath)
	}
	conn, err := dialAPI(t, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}
