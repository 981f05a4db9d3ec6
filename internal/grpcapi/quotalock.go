package grpcapi

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/big"
	"os"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The API takes a user's quota lock in the operator's namespace.
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=system,resources=leases,verbs=get;create;delete

// quotaLock serialises each user's quota decisions across every replica of the API (two run at
// once during a rolling update): a Lease named for the user, created to take the lock and
// deleted to release it. A lock whose holder died expires after ttl.
type quotaLock struct {
	c         client.Client // writes
	fresh     client.Reader // reads of the Lease, around the cache
	namespace string
	holder    string
	ttl       time.Duration
	now       func() time.Time
}

func newQuotaLock(c client.Client, fresh client.Reader, namespace string) *quotaLock {
	host, _ := os.Hostname()
	return &quotaLock{c: c, fresh: fresh, namespace: namespace, holder: host + "-" + rand.Text()[:8], ttl: 15 * time.Second, now: time.Now}
}

// lock takes the user's lock, waiting for another holder until ctx ends; unlock releases it.
func (l *quotaLock) lock(ctx context.Context, user string) (unlock func(), err error) {
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
			return func() { l.release(lease) }, nil
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

// breakExpired deletes the Lease if its holder has held it past ttl (it died holding it).
func (l *quotaLock) breakExpired(ctx context.Context, name string) error {
	var cur coordinationv1.Lease
	err := l.fresh.Get(ctx, client.ObjectKey{Namespace: l.namespace, Name: name}, &cur)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading the quota lock %s: %w", name, err)
	}
	if cur.Spec.AcquireTime == nil || l.now().Sub(cur.Spec.AcquireTime.Time) < l.ttl {
		return nil
	}
	rv := cur.ResourceVersion
	if err := l.c.Delete(ctx, &cur, client.Preconditions{ResourceVersion: &rv}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("breaking the expired quota lock %s: %w", name, err)
	}
	return nil
}

// release deletes the Lease this call created, even when the call's context has ended.
func (l *quotaLock) release(lease *coordinationv1.Lease) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	uid := lease.UID
	_ = l.c.Delete(ctx, lease, client.Preconditions{UID: &uid})
}
