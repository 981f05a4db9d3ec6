package engine

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/cloudspace-dev/cloudspace-operator/internal/inspect"
)

// recovery brings resources back quickly after the API server was unreachable. A reconcile that
// fails for want of the API server marks an outage; the first one that succeeds afterwards
// requeues every resource of the kind that is not Ready, instead of leaving those that failed
// meanwhile to their back-off.
type recovery struct {
	outage atomic.Bool
	events chan event.TypedGenericEvent[client.Object]
}

func newRecovery() *recovery {
	return &recovery{events: make(chan event.TypedGenericEvent[client.Object], 1024)}
}

// rateLimiter retries a failing resource with exponential back-off up to maxDelay, per
// resource only: a burst of failures (every resource of a kind during an outage) is not
// thinned out by a shared bucket afterwards.
func rateLimiter(maxDelay time.Duration) workqueue.TypedRateLimiter[reconcile.Request] {
	return workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](5*time.Millisecond, maxDelay)
}

// source feeds the requeued resources to the controller.
func (rc *recovery) source() source.TypedSource[reconcile.Request] {
	return source.Channel(rc.events, &handler.EnqueueRequestForObject{})
}

// observe notes how a reconcile ended, and on the first success after an outage requeues the
// kind's resources that are not Ready.
func (r *reconciler) observe(ctx context.Context, err error) {
	if err != nil {
		if unreachable(err) {
			r.recovery.outage.Store(true)
		}
		return
	}
	if !r.recovery.outage.CompareAndSwap(true, false) {
		return
	}
	all, err := r.resources.List(ctx, r.gvk)
	if err != nil {
		r.recovery.outage.Store(true)
		return
	}
	var requeue []client.Object
	for _, o := range all {
		if !inspect.IsReady(o) {
			requeue = append(requeue, o)
		}
	}
	log.FromContext(ctx).Info("the API server is back: requeueing what is not Ready", "kind", r.gvk.Kind, "resources", len(requeue))
	go func() {
		for _, o := range requeue {
			r.recovery.events <- event.TypedGenericEvent[client.Object]{Object: o}
		}
	}()
}

// unreachable reports whether err says the API server could not be reached or did not answer.
func unreachable(err error) bool {
	return utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err) ||
		apierrors.IsServiceUnavailable(err) || apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) ||
		errors.Is(err, context.DeadlineExceeded)
}
