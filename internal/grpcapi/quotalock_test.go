package grpcapi

import (
	"context"
	"errors"
	"fmt"
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

// decide holds the user's turn as a call does while it decides; done ends the call.
func decide(l *quotaLock, ctx context.Context, user string) (done func(), err error) {
	u, err := l.enter(ctx, user)
	if err != nil {
		return nil, err
	}
	return func() { u.yield(); l.exit(user, u) }, nil
}

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
			unlock, err := decide(replicas[i%2], ctx, "jo")
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
	other, err := decide(replicas[0], context.Background(), "kim")
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
	if _, err := decide(dead, context.Background(), "jo"); err != nil { // never unlocked
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := decide(alive, ctx, "jo"); err == nil {
		t.Fatal("a held lock was taken before its TTL")
	}
	now = now.Add(dead.ttl + time.Second)
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := decide(alive, ctx, "jo"); err != nil {
		t.Errorf("a dead replica's lock after its TTL: %v", err)
	}
}

// TestQuotaHoldsWhileAnotherReplicaCreates: replica A has counted and is creating the user's
// last running workspace when replica B counts; B must see A's and refuse, not count around it.
func TestQuotaHoldsWhileAnotherReplicaCreates(t *testing.T) {
	server := fake.NewClientBuilder().WithScheme(testScheme(t)).WithIndex(&infrav1alpha1.Workspace{}, ownerField, ownerIndex).Build()
	cfg := testSettings(t, inIDEs, func(c *Config) { c.Quota.MaxRunning = 1 })
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
	a := newWorkspaces(slowCreate, slowCreate, server, newNotifier(), cfg, newQuotaLock(server, server, "ops"))
	b := newWorkspaces(server, server, server, newNotifier(), cfg, newQuotaLock(server, server, "ops"))
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

// TestQuotaLockHandsTheLeaseOnWithinAReplica: a burst of one user's calls on one replica takes
// the Lease once, hands it from call to call, lets one decide at a time, and releases it after
// the last; a Lease held longer than a third of its ttl is renewed at the next turn.
func TestQuotaLockHandsTheLeaseOnWithinAReplica(t *testing.T) {
	var creates, updates, deletes atomic.Int32
	server := fake.NewClientBuilder().WithScheme(testScheme(t)).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			creates.Add(1)
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			updates.Add(1)
			return c.Update(ctx, obj, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			deletes.Add(1)
			return c.Delete(ctx, obj, opts...)
		},
	}).Build()
	l := newQuotaLock(server, server, "ops")
	first, err := decide(l, context.Background(), "jo")
	if err != nil {
		t.Fatal(err)
	}
	var inside, most atomic.Int32
	var wg sync.WaitGroup
	for range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			done, err := decide(l, context.Background(), "jo")
			if err != nil {
				t.Error(err)
				return
			}
			n := inside.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			inside.Add(-1)
			done()
		}()
	}
	for l.callers("jo") < 31 { // every call queued behind the first
		time.Sleep(time.Millisecond)
	}
	first()
	wg.Wait()
	if creates.Load() != 1 || deletes.Load() != 1 || most.Load() != 1 {
		t.Errorf("31 calls: %d Lease creates, %d deletes, %d inside at once; want 1, 1, 1", creates.Load(), deletes.Load(), most.Load())
	}

	now := time.Unix(1000, 0)
	l.now = func() time.Time { return now }
	held, err := decide(l, context.Background(), "jo")
	if err != nil {
		t.Fatal(err)
	}
	next := make(chan error)
	go func() {
		done, err := decide(l, context.Background(), "jo")
		if err == nil {
			done()
		}
		next <- err
	}()
	for l.callers("jo") < 2 {
		time.Sleep(time.Millisecond)
	}
	now = now.Add(l.ttl/3 + time.Second)
	held()
	if err := <-next; err != nil || creates.Load() != 2 || updates.Load() != 1 {
		t.Errorf("after holding past ttl/3: %v, %d Lease creates and %d renewals in all, want 2 and 1", err, creates.Load(), updates.Load())
	}
}

// TestQuotaBurstWritesConcurrentlyAndHolds: ten creates of one user at once, with room for
// five: the usage is read once, the five allowed writes are in flight together (none waits for
// another's turn), and the other five are refused; a write that fails gives its place back.
func TestQuotaBurstWritesConcurrentlyAndHolds(t *testing.T) {
	var lists atomic.Int32
	var inFlight, most atomic.Int32
	gate := make(chan struct{})
	server := fake.NewClientBuilder().WithScheme(testScheme(t)).WithIndex(&infrav1alpha1.Workspace{}, ownerField, ownerIndex).Build()
	c := interceptor.NewClient(server, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if _, ws := obj.(*infrav1alpha1.Workspace); ws && len((&client.CreateOptions{}).ApplyOptions(opts).DryRun) == 0 {
				n := inFlight.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				if n == 5 {
					close(gate)
				}
				select {
				case <-gate:
				case <-time.After(5 * time.Second):
				}
				defer inFlight.Add(-1)
				if obj.GetName() == "ws-fail" {
					return errors.New("the API server refused it")
				}
			}
			return c.Create(ctx, obj, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if list.GetObjectKind().GroupVersionKind().Kind == "WorkspaceList" { // read unstructured (decodingReader)
				lists.Add(1)
			}
			return c.List(ctx, list, opts...)
		},
	})
	cfg := testSettings(t, inIDEs, func(c *Config) { c.Quota.MaxWorkspaces, c.Quota.MaxRunning = 5, 5 })
	w := newWorkspaces(c, c, c, newNotifier(), cfg, newQuotaLock(server, server, "ops"))
	hold, err := decide(w.quota, context.Background(), "max") // keeps the burst in one Lease
	if err != nil {
		t.Fatal(err)
	}
	codesSeen := make(chan codes.Code, 10)
	var wg sync.WaitGroup
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := w.create(context.Background(), "max", spec{name: fmt.Sprintf("ws-%d", i), namespace: "ides"}, false)
			codesSeen <- status.Code(err)
		}()
	}
	for w.quota.callers("max") < 11 {
		time.Sleep(time.Millisecond)
	}
	hold()
	wg.Wait()
	close(codesSeen)
	count := map[codes.Code]int{}
	for code := range codesSeen {
		count[code]++
	}
	if count[codes.OK] != 5 || count[codes.ResourceExhausted] != 5 || lists.Load() != 1 || most.Load() != 5 {
		t.Errorf("10 creates with room for 5: %v, %d reads of the usage, %d writes in flight at most; want 5 OK, 5 ResourceExhausted, 1, 5",
			count, lists.Load(), most.Load())
	}

	// One place left: a create whose write fails gives it back to the next, within one Lease.
	cfg.Quota.MaxWorkspaces, cfg.Quota.MaxRunning = 6, 6
	u, err := w.quota.enter(context.Background(), "max") // holds the Lease, not the turn
	if err != nil {
		t.Fatal(err)
	}
	u.yield()
	defer w.quota.exit("max", u)
	if _, err := w.create(context.Background(), "max", spec{name: "ws-fail", namespace: "ides"}, false); status.Code(err) == codes.OK || status.Code(err) == codes.ResourceExhausted {
		t.Errorf("the failing create: %v, want the API server's refusal", err)
	}
	if _, err := w.create(context.Background(), "max", spec{name: "ws-last", namespace: "ides"}, false); err != nil {
		t.Errorf("the last place after a failed write: %v, want allowed", err)
	}
}

// TestQuotaLockRenewedIsNotBroken: replica A holds jo's Lease for longer than its ttl and
// renews it as it goes; replica B, counting from when A first took it, must not break it while
// A's last renewal is fresh: two replicas would then decide jo's quota at once. Once A stops
// renewing (it died), B takes it after a ttl from the last renewal.
func TestQuotaLockRenewedIsNotBroken(t *testing.T) {
	server := fake.NewClientBuilder().WithScheme(testScheme(t)).Build()
	now := time.Unix(1000, 0)
	clock := func() time.Time { return now }
	a, b := newQuotaLock(server, server, "ops"), newQuotaLock(server, server, "ops")
	a.now, b.now = clock, clock
	// A's first call takes the Lease, decides, and is still writing (it has not exited).
	writing, err := a.enter(context.Background(), "jo")
	if err != nil {
		t.Fatal(err)
	}
	writing.yield()
	defer a.exit("jo", writing)
	// A's next call comes after a third of the ttl and renews the Lease; the first call is
	// still writing, so the Lease stays held.
	now = now.Add(a.ttl - time.Second)
	renewing, err := decide(a, context.Background(), "jo")
	if err != nil {
		t.Fatal(err)
	}
	renewing()
	now = now.Add(2 * time.Second) // past ttl since A took it, 2 s since A renewed it
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if stolen, err := decide(b, ctx, "jo"); err == nil {
		stolen()
		t.Fatal("replica B took jo's Lease 2 s after replica A renewed it: both decide jo's quota at once")
	}
	now = now.Add(a.ttl) // A has not renewed for a ttl: it died holding the Lease
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := decide(b, ctx, "jo"); err != nil {
		t.Errorf("a Lease not renewed for its ttl: %v, want taken over", err)
	}
}
