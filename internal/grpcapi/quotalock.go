package grpcapi

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/big"
	"os"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The API takes a user's quota lock in the operator's namespace.
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=system,resources=leases,verbs=get;create;update;delete

// quotaLock serialises each user's quota decisions across every replica of the API (two run at
// once during a rolling update): a Lease named for the user, created to take the lock, renewed
// while held, and deleted to release it. A lock whose holder died expires after ttl. Within a
// replica, a user's calls take turns at deciding, and the Lease stays held while any of them
// decides or writes what it was allowed: a burst of one user's calls takes it once, reads the
// user's usage once (quota.go), and writes concurrently.
type quotaLock struct {
	c         client.Client // writes
	fresh     client.Reader // reads of the Lease, around the cache
	namespace string
	holder    string
	ttl       time.Duration
	now       func() time.Time

	mu    sync.Mutex
	users map[string]*userLock
}

// userLock is one user's entry in this replica while calls of theirs are in flight.
type userLock struct {
	turn    chan struct{} // holding its one slot is the turn to decide
	callers int           // calls deciding, waiting to, or writing; guarded by quotaLock.mu
	lease   *coordinationv1.Lease
	renewed time.Time // when the Lease was taken or last renewed

	mu      sync.Mutex // guards what follows
	base    *usage     // the user's usage read while the Lease was held; nil: read it
	pending []*reservation
}

func newQuotaLock(c client.Client, fresh client.Reader, namespace string) *quotaLock {
	host, _ := os.Hostname()
	return &quotaLock{c: c, fresh: fresh, namespace: namespace, holder: host + "-" + rand.Text()[:8], ttl: 15 * time.Second, now: time.Now}
}

// enter waits for the user's turn and holds the Lease; the caller gives the turn back with
// yield once it has decided, and counts itself out with exit once its write is done.
func (l *quotaLock) enter(ctx context.Context, user string) (*userLock, error) {
	u := l.join(user)
	select {
	case u.turn <- struct{}{}:
	case <-ctx.Done():
		l.exit(user, u)
		return nil, fmt.Errorf("waiting for the quota lock of %s: %w", user, ctx.Err())
	}
	if err := l.hold(ctx, user, u); err != nil {
		u.yield()
		l.exit(user, u)
		return nil, err
	}
	return u, nil
}

// hold makes sure this replica holds the user's Lease, renewing it once a third of its ttl has
// passed. A Lease lost meanwhile (another replica broke it as expired) is taken anew, and the
// usage read under it is forgotten: the other replica may have written.
func (l *quotaLock) hold(ctx context.Context, user string, u *userLock) error {
	if u.lease != nil && l.now().Sub(u.renewed) <= l.ttl/3 {
		return nil
	}
	if u.lease != nil {
		renewed := u.lease.DeepCopy()
		renewed.Spec.RenewTime = ptr.To(metav1.NewMicroTime(l.now()))
		if err := l.c.Update(ctx, renewed); err == nil {
			u.lease, u.renewed = renewed, l.now()
			return nil
		}
		u.forget()
	}
	lease, err := l.acquire(ctx, user)
	if err != nil {
		return err
	}
	u.lease, u.renewed = lease, l.now()
	return nil
}

// yield gives the turn back.
func (u *userLock) yield() { <-u.turn }

// exit counts a call out; the last one out releases the Lease.
func (l *quotaLock) exit(user string, u *userLock) {
	if l.leave(user, u) && u.lease != nil {
		l.release(u.lease)
		u.lease = nil
	}
}

// join counts a call in for the user's turn.
func (l *quotaLock) join(user string) *userLock {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.users == nil {
		l.users = map[string]*userLock{}
	}
	u := l.users[user]
	if u == nil {
		u = &userLock{turn: make(chan struct{}, 1)}
		l.users[user] = u
	}
	u.callers++
	return u
}

// callers counts the calls holding or waiting for the user's turn.
func (l *quotaLock) callers(user string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if u := l.users[user]; u != nil {
		return u.callers
	}
	return 0
}

// leave counts a call out and reports whether it was the last; the entry is then dropped, so
// that the next call reads the user's usage afresh.
func (l *quotaLock) leave(user string, u *userLock) (last bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	u.callers--
	if u.callers > 0 {
		return false
	}
	delete(l.users, user)
	return true
}

// acquire creates the user's Lease, waiting while another replica holds it.
func (l *quotaLock) acquire(ctx context.Context, user string) (*coordinationv1.Lease, error) {
	sum := sha256.Sum256([]byte(user))
	name := "cloudspace-quota-" + hex.EncodeToString(sum[:10])
	for {
		lease := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: l.namespace, Name: name},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(l.holder), AcquireTime: ptr.To(metav1.NewMicroTime(l.now())),
				LeaseDurationSeconds: ptr.To(int32(l.ttl / time.Second))},
		}
		err := l.c.Create(ctx, lease)
		if err == nil {
			return lease, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("taking the quota lock of %s: %w", user, err)
		}
		if err := l.breakExpired(ctx, name); err != nil {
			return nil, err
		}
		wait, _ := rand.Int(rand.Reader, big.NewInt(40))
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for the quota lock of %s: %w", user, ctx.Err())
		case <-time.After(time.Duration(10+wait.Int64()) * time.Millisecond):
		}
	}
}

// breakExpired deletes the Lease if its holder has not renewed it for its duration (it died
// holding it). A holder renews a Lease it keeps (hold), so a Lease taken long ago but renewed
// since is live: judging from when it was taken would break it under its holder, and two
// replicas would decide the user's quota at once.
func (l *quotaLock) breakExpired(ctx context.Context, name string) error {
	var cur coordinationv1.Lease
	err := l.fresh.Get(ctx, client.ObjectKey{Namespace: l.namespace, Name: name}, &cur)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading the quota lock %s: %w", name, err)
	}
	if !l.expired(&cur) {
		return nil
	}
	rv := cur.ResourceVersion
	if err := l.c.Delete(ctx, &cur, client.Preconditions{ResourceVersion: &rv}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("breaking the expired quota lock %s: %w", name, err)
	}
	return nil
}

// expired reports whether a Lease's holder has let it lapse: no renewal (or, never renewed,
// since it was taken) within the duration the holder wrote, or this replica's ttl when it
// wrote none. A Lease with neither time counts from its creation, so that it cannot be held
// for ever.
func (l *quotaLock) expired(lease *coordinationv1.Lease) bool {
	last := lease.CreationTimestamp.Time
	switch {
	case lease.Spec.RenewTime != nil:
		last = lease.Spec.RenewTime.Time
	case lease.Spec.AcquireTime != nil:
		last = lease.Spec.AcquireTime.Time
	}
	ttl := l.ttl
	if d := lease.Spec.LeaseDurationSeconds; d != nil && *d > 0 {
		ttl = time.Duration(*d) * time.Second
	}
	return !last.IsZero() && l.now().Sub(last) >= ttl
}

// release deletes the Lease this call created, even when the call's context has ended.
func (l *quotaLock) release(lease *coordinationv1.Lease) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	uid := lease.UID
	_ = l.c.Delete(ctx, lease, client.Preconditions{UID: &uid})
}
