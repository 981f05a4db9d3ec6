package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/render"
)

// reconcileNormal renders the chart, applies what drifted, prunes what is no longer rendered
// and computes the status. A spec that can never render is a terminal error: it is not retried
// until the spec (or the chart) changes.
func (r *ChartReconciler) reconcileNormal(ctx context.Context, s *scope) (ctrl.Result, error) {
	desired, err := r.desired(s)
	if err != nil {
		if !isRenderError(err) {
			return ctrl.Result{}, r.fail(s, infrav1alpha1.ReasonRenderFailed, err) // e.g. discovery: retried
		}
		return ctrl.Result{}, reconcile.TerminalError(r.fail(s, reasonFor(err), err))
	}
	if err := r.ensureWatches(desired); err != nil {
		return ctrl.Result{}, r.fail(s, infrav1alpha1.ReasonApplyFailed, err)
	}
	live, err := r.applyAll(ctx, s, desired)
	if err != nil {
		return ctrl.Result{}, r.fail(s, infrav1alpha1.ReasonApplyFailed, err)
	}
	if err := r.prune(ctx, s, desired); err != nil {
		return ctrl.Result{}, r.fail(s, infrav1alpha1.ReasonPruneFailed, err)
	}
	s.status.Inventory = &infrav1alpha1.Inventory{Entries: make([]infrav1alpha1.InventoryEntry, 0, len(desired))}
	for _, d := range desired {
		s.status.Inventory.Entries = append(s.status.Inventory.Entries, inventoryEntry(d))
	}
	s.status.ObservedGeneration = s.obj.GetGeneration()
	s.outcome.children = live
	r.metrics.children.WithLabelValues(r.gvk.Kind, s.obj.GetNamespace(), s.obj.GetName()).Set(float64(len(live)))
	after, err := r.projectStatus(ctx, s, live)
	if err != nil {
		return ctrl.Result{}, err
	}
	return r.requeue(s, after), nil
}

// projectStatus lets the kind's lifecycle compute its status fields from the live children
// (and their pods, for a PodObserver); it returns when the lifecycle wants another look.
func (r *ChartReconciler) projectStatus(ctx context.Context, s *scope, live []*unstructured.Unstructured) (time.Duration, error) {
	observed := live
	if _, ok := r.lifecycle.(PodObserver); ok {
		pods, err := r.pods(ctx, s.obj)
		if err != nil {
			return 0, err
		}
		observed = append(slices.Clone(live), pods...)
	}
	res, err := r.lifecycle.Status(s.obj, observed)
	if err != nil {
		return 0, fmt.Errorf("computing %s status: %w", r.gvk.Kind, err)
	}
	s.extra, s.progress = res.Fields, res.Progress
	return res.RequeueAfter, nil
}

// pods lists, from the child cache, the pods the chart's workloads run for obj.
func (r *ChartReconciler) pods(ctx context.Context, obj *unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	var list unstructured.UnstructuredList
	list.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "PodList"})
	err := r.children.List(ctx, &list, client.InNamespace(obj.GetNamespace()),
		client.MatchingLabels{LabelName: r.chart.Name(), LabelInstance: obj.GetName()})
	if err != nil {
		return nil, fmt.Errorf("listing the pods of %s %s: %w", r.gvk.Kind, obj.GetName(), err)
	}
	out := make([]*unstructured.Unstructured, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, &list.Items[i])
	}
	return out, nil
}

// fail records a failure in the outcome and, when it is new, in a Warning event: a resync of a
// resource that keeps failing the same way writes nothing.
func (r *ChartReconciler) fail(s *scope, reason string, err error) error {
	s.outcome.failure(reason, err)
	prev := meta.FindStatusCondition(s.status.Conditions, infrav1alpha1.ConditionDegraded)
	if prev == nil || prev.Status != metav1.ConditionTrue || prev.Reason != reason || prev.Message != err.Error() {
		r.event(s.obj, true, infrav1alpha1.EventReconcileFailed, "%v", err)
	}
	return err
}

// requeue decides when to look again without an event: on a reconcilePeriod, when the
// lifecycle asks (a timeout that will expire), and while children are not ready. The last is
// a safety net under the child watches: a rollout whose final status update is seen late is
// noticed within pollInterval. Ready resources are never polled.
func (r *ChartReconciler) requeue(s *scope, lifecycleAfter time.Duration) ctrl.Result {
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

// desired returns the decorated children for the CR, rendering only when an input changed:
// the values, the chart, the cluster's capabilities or the CR's identity.
func (r *ChartReconciler) desired(s *scope) ([]*unstructured.Unstructured, error) {
	values, err := r.lifecycle.Values(s.obj)
	if err != nil {
		return nil, &render.ValuesError{Err: err}
	}
	caps, capsKey, err := r.caps.Get()
	if err != nil {
		return nil, fmt.Errorf("reading cluster capabilities: %w", err)
	}
	inputs, err := inputsKey(values, r.watch.OverrideValues, r.chart.Digest(), capsKey, string(s.obj.GetUID()))
	if err != nil {
		return nil, err
	}
	key := client.ObjectKeyFromObject(s.obj)
	r.memoMu.Lock()
	m, ok := r.memo[key]
	r.memoMu.Unlock()
	if ok && m.inputs == inputs {
		return m.objects, nil
	}
	start := time.Now()
	objs, err := r.chart.Render(render.Input{
		Name: s.obj.GetName(), Namespace: s.obj.GetNamespace(), Values: values,
		Overrides: r.watch.OverrideValues, Capabilities: caps, IsUpgrade: s.status.Inventory != nil,
	})
	r.metrics.renderSeconds.WithLabelValues(r.gvk.Kind).Observe(time.Since(start).Seconds())
	if err != nil {
		return nil, err
	}
	if err := r.prepare(s.obj, objs); err != nil {
		return nil, err
	}
	r.memoMu.Lock()
	r.memo[key] = rendered{inputs: inputs, objects: objs}
	r.memoMu.Unlock()
	return objs, nil
}

// prepare checks that every child can be owned by the CR and decorates it.
func (r *ChartReconciler) prepare(owner *unstructured.Unstructured, objs []*unstructured.Unstructured) error {
	for _, o := range objs {
		mapping, err := r.mapper.RESTMapping(o.GroupVersionKind().GroupKind(), o.GroupVersionKind().Version)
		if err != nil {
			return &render.TemplateError{Err: fmt.Errorf("%s: unknown kind %s: %w", describe(o), o.GroupVersionKind(), err)}
		}
		if mapping.Scope.Name() != meta.RESTScopeNameNamespace {
			return &render.TemplateError{Err: fmt.Errorf("%s: cluster-scoped children are not supported (they cannot be owned by a namespaced resource)", describe(o))}
		}
		if o.GetNamespace() != owner.GetNamespace() {
			return &render.TemplateError{Err: fmt.Errorf("%s: namespace %q differs from the resource's %q", describe(o), o.GetNamespace(), owner.GetNamespace())}
		}
		if err := decorate(o, owner, r.chart.Name(), r.chart.Version()); err != nil {
			return err
		}
	}
	return nil
}

func inputsKey(values map[string]any, overrides map[string]string, parts ...string) (string, error) {
	data, err := json.Marshal([]any{values, overrides, parts})
	if err != nil {
		return "", fmt.Errorf("hashing values: %w", err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:16]), nil
}

// ensureWatches starts a watch on every child kind not yet watched, so that a child edited or
// deleted by hand is put back at once.
func (r *ChartReconciler) ensureWatches(objs []*unstructured.Unstructured) error {
	if !r.watch.WatchesDependents() {
		return nil
	}
	r.watchMu.Lock()
	defer r.watchMu.Unlock()
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		if r.watched[gvk] {
			continue
		}
		child := &unstructured.Unstructured{}
		child.SetGroupVersionKind(gvk)
		h := handler.EnqueueRequestForOwner(r.client.Scheme(), r.mapper, r.newObject(), handler.OnlyControllerOwner())
		if err := r.controller.Watch(source.Kind[client.Object](r.children, child, h)); err != nil {
			return fmt.Errorf("watching %s: %w", gvk, err)
		}
		r.watched[gvk] = true
	}
	return nil
}

// applyAll applies, in install order, every child that is missing or drifted, and returns the
// live children.
// One event per reconcile names every child created, and one every child updated: a write per
// kind of change rather than per child.
func (r *ChartReconciler) applyAll(ctx context.Context, s *scope, desired []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	live := make([]*unstructured.Unstructured, 0, len(desired))
	var created, updated []string
	defer func() {
		if len(created) > 0 {
			r.event(s.obj, false, infrav1alpha1.EventChildCreated, "Created %s", strings.Join(created, ", "))
		}
		if len(updated) > 0 {
			r.event(s.obj, false, infrav1alpha1.EventChildUpdated, "Updated %s", strings.Join(updated, ", "))
		}
	}()
	for _, d := range desired {
		current, err := r.getChild(ctx, d)
		if err != nil {
			return nil, err
		}
		if upToDate(d, current) {
			live = append(live, current)
			continue
		}
		applied, err := r.apply(ctx, d)
		if err != nil {
			return nil, err
		}
		if current == nil {
			created = append(created, describe(d))
		} else {
			updated = append(updated, describe(d))
		}
		live = append(live, applied)
	}
	return live, nil
}

// getChild reads a child from the child cache; nil when it does not exist.
func (r *ChartReconciler) getChild(ctx context.Context, like *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(like.GroupVersionKind())
	err := r.children.Get(ctx, client.ObjectKeyFromObject(like), u)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", describe(like), err)
	}
	return u, nil
}

func (r *ChartReconciler) apply(ctx context.Context, desired *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	obj := desired.DeepCopy()
	start := time.Now()
	err := r.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(r.cfg.fieldManager), client.ForceOwnership)
	r.metrics.applySeconds.WithLabelValues(r.gvk.Kind).Observe(time.Since(start).Seconds())
	if err != nil {
		return nil, fmt.Errorf("applying %s: %w", describe(desired), err)
	}
	log.FromContext(ctx).V(1).Info("applied", "child", describe(desired))
	return obj, nil
}

// prune deletes the children of the last inventory that the chart no longer renders.
func (r *ChartReconciler) prune(ctx context.Context, s *scope, desired []*unstructured.Unstructured) error {
	if s.status.Inventory == nil {
		return nil
	}
	keep := map[string]bool{}
	for _, d := range desired {
		keep[inventoryEntry(d).ID] = true
	}
	var errs []error
	for _, e := range s.status.Inventory.Entries {
		if keep[e.ID] {
			continue
		}
		if _, err := r.deleteChild(ctx, s.obj, e); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// deleteChild deletes one inventory entry if it still exists and is still ours; it reports
// whether the child is still there.
func (r *ChartReconciler) deleteChild(ctx context.Context, owner *unstructured.Unstructured, e infrav1alpha1.InventoryEntry) (bool, error) {
	like, err := objectFromEntry(e)
	if err != nil {
		return false, err
	}
	current, err := r.getChild(ctx, like)
	if err != nil || current == nil {
		return false, err
	}
	if !isControlledBy(current, owner.GetUID()) {
		// Someone else owns it now: leave it alone.
		return false, nil
	}
	if current.GetDeletionTimestamp() != nil {
		return true, nil
	}
	uid := current.GetUID()
	if err := r.client.Delete(ctx, current, client.PropagationPolicy("Background"), client.Preconditions{UID: &uid}); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return true, fmt.Errorf("deleting %s: %w", describe(current), err)
	}
	r.event(owner, false, infrav1alpha1.EventChildDeleted, "Deleted %s", describe(current))
	return true, nil
}
