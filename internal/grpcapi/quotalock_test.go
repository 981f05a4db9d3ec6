package grpcapi

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
)

// TestQuotaLockExcludesAcrossReplicas: two replicas' locks on one API server never let two
// holders of the same user's lock in at once, and leave other users alone.
func TestQuotaLockExcludesAcrossReplicas(t *testing.T) {
	server := fake.NewClientBuilder().WithScheme(testScheme(t)).Build()
	replicas := []*quotaLock{newQuotaLock(server, server, "ops"), newQuotaLock(server, server, "ops")}
	var inside, most atomic.Int32
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			unlock, err := replicas[i%2].lock(ctx, "jo")
			if err != nil {
				t.Error(err)
				return
			}
			n := inside.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			time.Sleep(time.Millisecond) // a critical section that takes time
			inside.Add(-1)
			unlock()
		}()
	}
	other, err := replicas[0].lock(context.Background(), "kim")
	if err != nil {
		t.Fatalf("another user's lock: %v", err)
	}
	other()
	wg.Wait()
	if most.Load() != 1 {
		t.Errorf("%d holders of one user's lock at once, want 1", most.Load())
	}
}

// TestQuotaLockOfADeadReplicaExpires: a lock never released is taken over after its TTL.
func TestQuotaLockOfADeadReplicaExpires(t *testing.T) {
	server := fake.NewClientBuilder().WithScheme(testScheme(t)).Build()
	now := time.Unix(1000, 0)
	dead, alive := newQuotaLock(server, server, "ops"), newQuotaLock(server, server, "ops")
	dead.now, alive.now = func() time.Time { return now }, func() time.Time { return now }
	if _, err := dead.lock(context.Background(), "jo"); err != nil { // never unlocked
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := alive.lock(ctx, "jo"); err == nil {
		t.Fatal("a held lock was taken before its TTL")
	}
	now = now.Add(dead.ttl + time.Second)
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := alive.lock(ctx, "jo"); err != nil {
		t.Errorf("a dead replica's lock after its TTL: %v", err)
	}
}

// TestQuotaHoldsWhileAnotherReplicaCreates: replica A has counted and is creating the user's
// last running workspace when replica B counts; B must see A's and refuse, not count around it.
func TestQuotaHoldsWhileAnotherReplicaCreates(t *testing.T) {
	server := fake.NewClientBuilder().WithScheme(testScheme(t)).WithIndex(&infrav1alpha1.Workspace{}, ownerField, ownerIndex).Build()
	cfg := defaultConfig()
	cfg.namespaces, cfg.maxRunning = []string{"ides"}, 1
	inside, bDone := make(chan struct{}), make(chan struct{})
	slowCreate := interceptor.NewClient(server, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if len((&client.CreateOptions{}).ApplyOptions(opts).DryRun) == 0 {
				close(inside)
				select { // give B every chance to decide while A is mid-create
				case <-bDone:
				case <-time.After(300 * time.Millisecond):
				}
			}
			return c.Create(ctx, obj, opts...)
		},
	})
	a := &workspaces{c: slowCreate, fresh: server, notifier: newNotifier(), cfg: cfg, quota: newQuotaLock(server, server, "ops")}
	b := &workspaces{c: server, fresh: server, notifier: newNotifier(), cfg: cfg, quota: newQuotaLock(server, server, "ops")}
	ctx := context.Background()
	aErr := make(chan error, 1)
	go func() {
		_, err := a.create(ctx, "lee", spec{name: "first", namespace: "ides"}, false)
		aErr <- err
	}()
	<-inside
	_, err := b.create(ctx, "lee", spec{name: "second", namespace: "ides"}, false)
	close(bDone)
	if err := <-aErr; err != nil {
		t.Fatalf("replica A's create: %v", err)
	}
	if status.Code(err) != codes.ResourceExhausted {
		t.Errorf("replica B's create while A took the last place: %v, want ResourceExhausted", err)
	}
}
