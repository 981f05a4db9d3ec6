package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
		s.outcome.failure(reasonFor(err), err)
		r.event(s.obj, true, infrav1alpha1.EventReconcileFailed, "%v", err)
		return ctrl.Result{}, reconcile.TerminalError(err)
	}
	if err := r.ensureWatches(desired); err != nil {
		s.outcome.failure(infrav1alpha1.ReasonApplyFailed, err)
		return ctrl.Result{}, err
	}
	live, err := r.applyAll(ctx, s, desired)
	if err != nil {
		s.outcome.failure(infrav1alpha1.ReasonApplyFailed, err)
		r.event(s.obj, true, infrav1alpha1.EventReconcileFailed, "%v", err)
		return ctrl.Result{}, err
	}
	if err := r.prune(ctx, s, desired); err != nil {
		s.outcome.failure(infrav1alpha1.ReasonPruneFailed, err)
		r.event(s.obj, true, infrav1alpha1.EventReconcileFailed, "%v", err)
		return ctrl.Result{}, err
	}
	s.status.Inventory = &infrav1alpha1.Inventory{Entries: make([]infrav1alpha1.InventoryEntry, 0, len(desired))}
	for _, d := range desired {
		s.status.Inventory.Entries = append(s.status.Inventory.Entries, inventoryEntry(d))
	}
	s.status.ObservedGeneration = s.obj.GetGeneration()
	s.outcome.children = live
	r.metrics.children.WithLabelValues(r.gvk.Kind, s.obj.GetNamespace(), s.obj.GetName()).Set(float64(len(live)))
	if s.extra, err = r.lifecycle.Status(s.obj, live); err != nil {
		return ctrl.Result{}, fmt.Errorf("computing %s status: %w", r.gvk.Kind, err)
	}
	return r.requeue(s), nil
}

// requeue decides when to look again without an event: only on a reconcilePeriod, or while
// children are not ready and nothing watches them.
func (r *ChartReconciler) requeue(s *scope) ctrl.Result {
	if r.watch.ReconcilePeriod > 0 {
		return ctrl.Result{RequeueAfter: r.watch.ReconcilePeriod}
	}
	if !r.watch.WatchesDependents() {
		if _, waiting := childProblems(s.outcome.children); len(waiting) > 0 {
			return ctrl.Result{RequeueAfter: r.cfg.pollInterval}
		}
	}
	return ctrl.Result{}
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
func (r *ChartReconciler) applyAll(ctx context.Context, s *scope, desired []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	live := make([]*unstructured.Unstructured, 0, len(desired))
	for _, d := range desired {
		current, err := r.getChild(ctx, d)
		if err != nil {
			return nil, err
		}
		if upToDate(d, current) {
			live = append(live, current)
			continue
		}
		applied, err := r.apply(ctx, s.obj, d, current != nil)
		if err != nil {
			return nil, err
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

func (r *ChartReconciler) apply(ctx context.Context, owner, desired *unstructured.Unstructured, exists bool) (*unstructured.Unstructured, error) {
	obj := desired.DeepCopy()
	start := time.Now()
	err := r.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(r.cfg.fieldManager), client.ForceOwnership)
	r.metrics.applySeconds.WithLabelValues(r.gvk.Kind).Observe(time.Since(start).Seconds())
	if err != nil {
		return nil, fmt.Errorf("applying %s: %w", describe(desired), err)
	}
	log.FromContext(ctx).V(1).Info("applied", "child", describe(desired), "existed", exists)
	if exists {
		r.event(owner, false, infrav1alpha1.EventChildUpdated, "Updated %s", describe(desired))
	} else {
		r.event(owner, false, infrav1alpha1.EventChildCreated, "Created %s", describe(desired))
	}
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

// jsonEqual compares two JSON-like values (from unstructured objects).
func jsonEqual(a, b any) bool {
	if isEmptyJSON(a) && isEmptyJSON(b) {
		return true
	}
	return equality.Semantic.DeepEqual(a, b)
}

func isEmptyJSON(v any) bool {
	switch t := v.(type) {
	case nil:
		return true
	case map[string]any:
		return len(t) == 0
	}
	return false
}
