// Package engine is the hybrid engine: one generic reconciler per watches.yaml entry that
// renders the entry's chart for each custom resource and applies, prunes, watches and tears
// down the children. It knows no kind: a kind brings its Go code through the Lifecycle contract
// (WithLifecycle), and a kind without any is served from its chart alone.
//
// The engine never takes what is not its own: it writes and deletes only objects it created for
// that resource (controller owner reference with the resource's UID, or AnnotationRetainedFor
// naming it); any other object in a child's place is an OwnershipConflict.
//
// The package defines no API and says so to controller-gen, which once took one of its types
// for one (the cache's compact objects, since moved to objcache, which says so too).
// +kubebuilder:skip
package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/engine/objcache"
	"github.com/cloudspace-dev/cloudspace-operator/internal/render"
	"github.com/cloudspace-dev/cloudspace-operator/internal/watches"
)

// The engine's own writes on any custom resource: events. A kind's RBAC (its resource, status,
// finalizers and the kinds its chart renders) is marked next to its lifecycle.
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get

// reconciler serves one watches.yaml entry: it renders the entry's chart for each custom
// resource and owns the children's lifecycle.
type reconciler struct {
	client    client.Client  // writes
	apiReader client.Reader  // reads that must not be stale: who holds a child's place, our finalizer
	resources objcache.Store // the manager's cache: the custom resources
	children  objcache.Store // the operator's children only (label-selected)
	mapper    meta.RESTMapper
	recorder  record.EventRecorder
	caps      *capabilities
	chart     *render.Chart
	lifecycle Lifecycle
	watch     watches.Watch
	gvk       schema.GroupVersionKind
	selector  labels.Selector
	shard     string // ServedByAnnotation of what we serve (shardOf(selector))
	cfg       config
	metrics   *engineMetrics

	controller controller.Controller
	watchMu    sync.Mutex
	watched    map[schema.GroupVersionKind]bool

	renders  renderMemo
	status   *statusWriter
	recovery *recovery
	owners   *owners // what the live resources every reconciler serves hold
}

// scope is what one reconcile of one custom resource works on.
type scope struct {
	obj          *unstructured.Unstructured
	status       engineStatus
	fields       map[string]any // the kind's status fields (StatusReporter)
	progress     []string       // the fields that only count progress
	prompt       bool           // the kind wants this status written at once
	notice       Notice         // the kind's event, recorded when the status is written changed
	written      func()         // the kind's call when the status is written changed
	outcome      outcome
	firstInstall bool          // no child was applied before: the status has no inventory
	released     bool          // our finalizer is gone: forget the resource once its status is written
	conflicted   bool          // a write found a child changed since it was read: write no status now
	deferred     time.Duration // a progress-only status write was put off by this long
}

// Reconcile brings one custom resource's children to what its chart renders.
func (r *reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	start := time.Now()
	defer func() {
		r.observe(ctx, retErr)
		log.FromContext(ctx).V(1).Info("reconciled", "duration", time.Since(start).String(), "requeueAfter", res.RequeueAfter.String(), "error", retErr)
	}()
	obj, err := r.resources.Get(ctx, r.gvk, req.NamespacedName)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("getting %s %s: %w", r.gvk.Kind, req, err)
	}
	if obj == nil {
		r.forget(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	if !r.serves(obj) {
		r.forget(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	if err := r.status.memo.overlay(obj); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.ensureFinalizer(ctx, obj); err != nil {
		return ctrl.Result{}, r.refusedResource(obj, err)
	}
	s, err := newScope(obj, r.status.memo.get(obj).inventory)
	if err != nil {
		return ctrl.Result{}, err
	}
	base := obj.DeepCopy()
	defer func() {
		retErr = errors.Join(retErr, r.refusedResource(obj, r.finish(ctx, base, s)))
		res.RequeueAfter = minPositive(res.RequeueAfter, s.deferred)
	}()
	switch {
	case !obj.GetDeletionTimestamp().IsZero():
		return r.reconcileDelete(ctx, s)
	case obj.GetAnnotations()[infrav1alpha1.PauseAnnotation] == "true":
		s.outcome.paused = true
		return ctrl.Result{}, nil
	default:
		return r.reconcileNormal(ctx, s)
	}
}

// refusedResource reports a write to the resource itself that the API server refused as
// invalid: it cannot succeed until the spec changes, and the status that would say so cannot
// be written either, so an event says it and the reconcile is not retried.
func (r *reconciler) refusedResource(obj *unstructured.Unstructured, err error) error {
	if !apierrors.IsInvalid(err) {
		return err
	}
	r.event(obj, true, infrav1alpha1.EventResourceInvalid, "The API server refuses every change to this %s until its spec is fixed: %v", r.gvk.Kind, err)
	return reconcile.TerminalError(err)
}

// newScope starts a reconcile of obj. putOff is the inventory of a status put off and not yet
// written (firstStatusWait): its children exist, so it counts as recorded.
func newScope(obj *unstructured.Unstructured, putOff *infrav1alpha1.Inventory) (*scope, error) {
	st, err := readStatus(obj)
	if err != nil {
		return nil, fmt.Errorf("reading the status of %s %s: %w", obj.GetKind(), obj.GetName(), err)
	}
	if putOff != nil {
		st.Inventory = mergeInventory(st.Inventory, putOff)
	}
	return &scope{obj: obj, status: st, firstInstall: st.Inventory == nil, outcome: outcome{generation: obj.GetGeneration()}}, nil
}

// ensureFinalizer adds the finalizer to a live resource that lacks it. When we added it before,
// the cache may just not show our patch yet: the API server is asked first, so that a lagging
// cache costs a read, not a write, and a finalizer removed by hand is put back.
func (r *reconciler) ensureFinalizer(ctx context.Context, obj *unstructured.Unstructured) error {
	if !obj.GetDeletionTimestamp().IsZero() || r.settled(obj) {
		return nil
	}
	target := obj.DeepCopy()
	if r.status.memo.get(obj).finalizer {
		if err := r.apiReader.Get(ctx, client.ObjectKeyFromObject(obj), target); err != nil {
			return fmt.Errorf("reading %s %s: %w", r.gvk.Kind, obj.GetName(), err)
		}
		if r.settled(target) || !target.GetDeletionTimestamp().IsZero() {
			obj.SetFinalizers(target.GetFinalizers())
			obj.SetAnnotations(target.GetAnnotations())
			obj.SetDeletionTimestamp(target.GetDeletionTimestamp())
			return nil
		}
	}
	base := target.DeepCopy()
	controllerutil.AddFinalizer(target, infrav1alpha1.Finalizer)
	// A resource handed over from another shard is ours to tear down from now on.
	r.stampShard(target)
	if err := r.client.Patch(ctx, target, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("adding the finalizer: %w", err)
	}
	obj.SetFinalizers(target.GetFinalizers())
	obj.SetAnnotations(target.GetAnnotations())
	r.status.memo.record(obj, func(w *lastWrite) { w.finalizer = true })
	return nil
}

// reconcileNormal renders the chart, applies what is missing or drifted, prunes what is no
// longer rendered and computes the status. A spec that can never render is a terminal error:
// it is not retried until the spec (or the chart) changes.
func (r *reconciler) reconcileNormal(ctx context.Context, s *scope) (ctrl.Result, error) {
	desired, err := r.desired(s)
	if err != nil {
		if !isRenderError(err) {
			return ctrl.Result{}, r.fail(s, infrav1alpha1.ReasonRenderFailed, err) // e.g. discovery: retried
		}
		return ctrl.Result{}, reconcile.TerminalError(r.stall(s, reasonFor(err), err))
	}
	if err := r.ensureWatches(desired); err != nil {
		return ctrl.Result{}, r.fail(s, infrav1alpha1.ReasonApplyFailed, err)
	}
	// Before any child is written, so that the child cache keeps each one whole from its first
	// event on (owners.go).
	r.owners.expect(s.obj, inventoryIDs(desired))
	live, err := r.applyAll(ctx, s, desired)
	if err != nil {
		return r.applyFailed(s, desired, err)
	}
	if err := r.prune(ctx, s, desired); err != nil {
		return ctrl.Result{}, r.fail(s, infrav1alpha1.ReasonPruneFailed, err)
	}
	s.status.Inventory = inventoryOf(desired)
	s.status.ObservedGeneration = s.obj.GetGeneration()
	s.outcome.children = live
	r.metrics.observeChildren(r.gvk.Kind, client.ObjectKeyFromObject(s.obj), len(live))
	after, err := r.projectStatus(ctx, s, live)
	if err != nil {
		return ctrl.Result{}, err
	}
	return r.requeue(s, after), nil
}

// applyFailed is the result of a reconcile whose children could not all be applied.
func (r *reconciler) applyFailed(s *scope, desired []*unstructured.Unstructured, err error) (ctrl.Result, error) {
	var conflict *ownershipConflictError
	var invalid *childInvalidError
	switch {
	case errors.Is(err, errConflict):
		// No status is written from reads a write conflict proved out of date, but the
		// children written before the conflict exist: remembered, a prune or a delete before
		// the next status write finds them.
		s.conflicted = true
		r.status.memo.remember(s.obj, inventoryOf(desired))
		return ctrl.Result{RequeueAfter: conflictRetry}, nil
	case errors.As(err, &conflict):
		// Retried: the ownership conflict clears once the other object is gone.
		return ctrl.Result{}, r.stall(s, conflict.Reason, err)
	}
	// Some children may have been created: record them, so that a delete finds them.
	s.status.Inventory = mergeInventory(s.status.Inventory, inventoryOf(desired))
	if errors.As(err, &invalid) {
		// Retrying a child refused as invalid only repeats the refusal: like a render
		// failure, it waits for the spec to change.
		return ctrl.Result{}, reconcile.TerminalError(r.stall(s, infrav1alpha1.ReasonApplyFailed, err))
	}
	return ctrl.Result{}, r.fail(s, infrav1alpha1.ReasonApplyFailed, err)
}

// fail records a failure in the outcome and, when it is new, in a Warning event: a resync of a
// resource that keeps failing the same way writes nothing.
func (r *reconciler) fail(s *scope, reason string, err error) error {
	s.outcome.failure(reason, err)
	if !s.status.degradedBy(reason, err.Error()) {
		// An ownership conflict's event and an invalid child's say their reason; every other
		// failure is ReconcileFailed.
		eventReason := infrav1alpha1.EventReconcileFailed
		var conflict *ownershipConflictError
		var invalid *childInvalidError
		switch {
		case errors.As(err, &conflict):
			eventReason = conflict.Reason
		case errors.As(err, &invalid):
			eventReason = infrav1alpha1.EventChildInvalid
		}
		r.event(s.obj, true, eventReason, "%v", err)
	}
	return err
}

// stall is fail for a failure that lasts until something changes (ConditionStalled).
func (r *reconciler) stall(s *scope, reason string, err error) error {
	s.outcome.stalled = true
	return r.fail(s, reason, err)
}

// requeue decides when to look again without an event: on a reconcilePeriod, when the
// lifecycle asks (a timeout that will expire), and while children are not ready. The last is
// a safety net under the child watches: a rollout whose final status update is seen late is
// noticed within pollInterval. Ready resources are never polled.
func (r *reconciler) requeue(s *scope, lifecycleAfter time.Duration) ctrl.Result {
	after := r.watch.ReconcilePeriod
	if _, waiting := childProblems(s.outcome.children); len(waiting) > 0 {
		after = minPositive(after, r.cfg.pollInterval)
	}
	return ctrl.Result{RequeueAfter: minPositive(after, lifecycleAfter)}
}

func minPositive(a, b time.Duration) time.Duration {
	switch {
	case a <= 0:
		return b
	case b <= 0:
		return a
	}
	return min(a, b)
}

// finish writes the scope's status and, once our finalizer is gone, forgets the resource.
func (r *reconciler) finish(ctx context.Context, base *unstructured.Unstructured, s *scope) error {
	err := r.patchStatus(ctx, base, s)
	if s.released {
		r.forget(client.ObjectKeyFromObject(s.obj))
	}
	return err
}

// patchStatus computes the scope's status and hands it to the status writer.
func (r *reconciler) patchStatus(ctx context.Context, base *unstructured.Unstructured, s *scope) error {
	if s.conflicted {
		return nil // computed from reads a write conflict proved out of date
	}
	var before metav1.Condition
	if c := meta.FindStatusCondition(s.status.Conditions, infrav1alpha1.ConditionDegraded); c != nil {
		before = *c
	}
	setStatus(&s.status, s.outcome)
	r.metrics.observeConditions(r.gvk.Kind, client.ObjectKeyFromObject(s.obj), s.status.Conditions)
	r.metrics.observeFailure(r.gvk.Kind, before, meta.FindStatusCondition(s.status.Conditions, infrav1alpha1.ConditionDegraded))
	if err := writeStatus(s.obj, s.status, s.fields); err != nil {
		return fmt.Errorf("building status: %w", err)
	}
	written, err := r.status.write(ctx, base, s)
	if written && s.notice.Reason != "" {
		r.event(s.obj, false, s.notice.Reason, "%s", s.notice.Message)
	}
	if written && s.written != nil {
		s.written()
	}
	return err
}

// event records an event on the custom resource.
func (r *reconciler) event(obj *unstructured.Unstructured, warning bool, reason, format string, args ...any) {
	kind := "Normal"
	if warning {
		kind = "Warning"
	}
	r.recorder.Eventf(obj, kind, reason, format, args...)
}

// forget drops everything remembered about a resource that is gone or no longer served.
func (r *reconciler) forget(key types.NamespacedName) {
	r.renders.forget(key)
	r.status.memo.forget(key)
	r.metrics.forget(r.gvk.Kind, key)
}

// name is the controller's name: the kind's key, e.g. "genericdaemon.infra.cloudspace.dev".
func (r *reconciler) name() string {
	return kindKey(r.gvk)
}
