package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/pkg/client/clientset/versioned"
)

// syncBuffer is a buffer the watcher writes to while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestWatcherSeesAndAcknowledgesWorkspaces runs the example against a real API server with the
// CRDs and no operator, with the generated clients only: through the clientset it creates a workspace, which the
// watcher sees through its informer and lister and marks Pending with UpdateStatus; then the
// delete, which it also sees.
func TestWatcherSeesAndAcknowledgesWorkspaces(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run `make test-integration`, which builds etcd and kube-apiserver")
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	const ns = "default"
	cs := versioned.NewForConfigOrDie(cfg)
	out := &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- (&Watcher{Clients: cs, Namespace: ns, Acknowledge: true, Out: out}).Run(ctx)
	}()

	ws := &infrav1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "alice-go"}, Spec: infrav1alpha1.WorkspaceSpec{Owner: "alice"}}
	if _, err := cs.InfraV1alpha1().Workspaces(ns).Create(ctx, ws, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var got *infrav1alpha1.Workspace
	waitFor(t, "the watcher to mark the workspace Pending", func() bool {
		got, err = cs.InfraV1alpha1().Workspaces(ns).Get(ctx, ws.Name, metav1.GetOptions{})
		return err == nil && got.Status.Phase == infrav1alpha1.WorkspacePending && got.Status.Message == Acknowledged
	})
	waitFor(t, "the watcher to print the acknowledged workspace", func() bool {
		return strings.Contains(out.String(), "default/alice-go owner=alice phase=Pending")
	})
	if err := cs.InfraV1alpha1().Workspaces(ns).Delete(ctx, ws.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the watcher to print the delete", func() bool { return strings.Contains(out.String(), "default/alice-go deleted") })
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	t.Logf("watcher output:\n%s", out)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		t.Fatalf("waiting for %s", what)
	}
}
