package engine

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
)

// statusWriter writes each resource's status, and decides when. Its rules:
//
//   - One patch per reconcile, against the status we last wrote: the operator is the status's
//     only writer, so memo.overlay puts what we wrote over a cache that may lag, and a stale
//     cache never makes us repeat or undo a write. The memo drops a status once the cache holds
//     the object that write returned (caughtUp).
//   - Nothing is written when nothing changed, nor after a write conflict (patchStatus).
//   - A change of progress only (the kind's progress fields, condition messages) is written at
//     most every interval.
//   - The first status of a generation whose children are on their way to ready waits up to
//     firstDelay, so that children ready by then cost one write instead of two; the children it
//     applied meanwhile are remembered (memo.putOff), so that a prune or a delete finds them.
//     A failure, or a status the kind marks Prompt, is written at once.
type statusWriter struct {
	client     client.Client
	interval   time.Duration
	firstDelay time.Duration
	memo       writeMemo
}

func newStatusWriter(c client.Client, cfg config) *statusWriter {
	return &statusWriter{client: c, interval: cfg.statusInterval, firstDelay: cfg.firstStatusDelay}
}

// write patches s.obj's status, built on base, when the rules above say so, and reports
// whether it did; otherwise it sets s.deferred to when it may be written.
func (w *statusWriter) write(ctx context.Context, base *unstructured.Unstructured, s *scope) (bool, error) {
	if equalStatus(base, s.obj) {
		return false, nil
	}
	if wait := w.firstWait(base, s); wait > 0 {
		s.deferred = wait
		return false, nil
	}
	last := w.memo.get(s.obj)
	if progressOnly(base, s.obj, s.progress) && !last.at.IsZero() {
		if wait := w.interval - time.Since(last.at); wait > 0 {
			s.deferred = wait
			return false, nil
		}
	}
	status, _, _ := unstructured.NestedFieldCopy(s.obj.Object, "status")
	if err := w.client.Status().Patch(ctx, s.obj, client.MergeFrom(base)); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("patching status: %w", err)
	}
	w.memo.record(s.obj, func(l *lastWrite) {
		l.status, l.version, l.at, l.inventory = status, s.obj.GetResourceVersion(), time.Now(), nil
	})
	return true, nil
}

// firstWait is how long the first status of the resource's generation may still be put off:
// while its children are only on their way to ready, within firstDelay of the first time it
// was put off.
func (w *statusWriter) firstWait(base *unstructured.Unstructured, s *scope) time.Duration {
	ready := meta.FindStatusCondition(s.status.Conditions, infrav1alpha1.ConditionReady)
	generation, _, _ := unstructured.NestedInt64(base.Object, "status", "observedGeneration")
	if w.firstDelay <= 0 || s.prompt || generation == s.obj.GetGeneration() || ready == nil || ready.Reason != infrav1alpha1.ReasonApplying {
		return 0
	}
	since := w.memo.putOff(s.obj, s.status.Inventory, time.Now())
	return w.firstDelay - time.Since(since)
}
