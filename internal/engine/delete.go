package engine

import (
	"context"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
)

// reconcileDelete tears the children down from the inventory, never from a render, so that it
// works when the chart no longer renders: the children the kind retains are released, every
// other one is deleted in reverse install order, and the finalizer is removed once all are gone.
// The conditions say Deleting until the resource is gone, also while other finalizers hold it.
func (r *reconciler) reconcileDelete(ctx context.Context, s *scope) (ctrl.Result, error) {
	s.outcome.deleting = true
	if !controllerutil.ContainsFinalizer(s.obj, infrav1alpha1.Finalizer) {
		s.released = true
		return ctrl.Result{}, nil
	}
	var entries []infrav1alpha1.InventoryEntry
	if s.status.Inventory != nil {
		entries = slices.Clone(s.status.Inventory.Entries)
	}
	slices.Reverse(entries)
	kept, err := r.retain(ctx, s, entries)
	if err != nil {
		return ctrl.Result{}, err
	}
	remaining, err := r.deleteEntries(ctx, s.obj, entries, kept)
	if err != nil {
		return ctrl.Result{}, err
	}
	if remaining > 0 {
		// The children's deletion events requeue us too; this is the fallback.
		return ctrl.Result{RequeueAfter: r.cfg.deleteInterval}, nil
	}
	return ctrl.Result{}, r.removeFinalizer(ctx, s)
}

// retain asks the kind which of the live children outlive the resource and releases them. It
// returns the inventory IDs of the kept children.
func (r *reconciler) retain(ctx context.Context, s *scope, entries []infrav1alpha1.InventoryEntry) (map[string]bool, error) {
	var live []*unstructured.Unstructured
	for _, e := range entries {
		like, err := objectFromEntry(e)
		if err != nil {
			return nil, err
		}
		current, err := r.getChild(ctx, like)
		if err != nil {
			return nil, err
		}
		if current != nil && claimOf(current, s.obj) == claimOwned {
			live = append(live, current)
		}
	}
	keep, err := retainedOf(r.lifecycle, s.obj, live)
	if err != nil {
		return nil, fmt.Errorf("deciding which children of %s %s to keep: %w", r.gvk.Kind, s.obj.GetName(), err)
	}
	kept := map[string]bool{}
	for _, k := range keep {
		if err := r.release(ctx, s.obj, k); err != nil {
			return nil, err
		}
		kept[inventoryEntry(k).ID] = true
	}
	return kept, nil
}

// release leaves a child in place for good: without our managed-by label (so we stop caching
// it) and without an owner reference to the resource (so the garbage collector keeps it),
// marked as retained for the resource (so that a later resource of the same kind and name may
// adopt it, if its lifecycle agrees).
func (r *reconciler) release(ctx context.Context, owner, child *unstructured.Unstructured) error {
	base := child.DeepCopy()
	child.SetOwnerReferences(slices.DeleteFunc(child.GetOwnerReferences(), func(ref metav1.OwnerReference) bool {
		return ref.UID == owner.GetUID()
	}))
	labels := child.GetLabels()
	delete(labels, LabelManagedBy)
	child.SetLabels(labels)
	setAnnotation(child, AnnotationRetainedFor, retainedFor(owner))
	setAnnotation(child, AnnotationReleasedAt, time.Now().UTC().Format(time.RFC3339))
	if len(r.cfg.recordKey) > 0 {
		setAnnotation(child, AnnotationReleaseSeal, releaseSeal(r.cfg.recordKey, child))
	}
	if err := r.client.Patch(ctx, child, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("releasing %s: %w", describe(child), err)
	}
	r.event(owner, false, infrav1alpha1.EventChildReleased, "Kept %s after delete", describe(child))
	return nil
}

func (r *reconciler) removeFinalizer(ctx context.Context, s *scope) error {
	base := s.obj.DeepCopy()
	controllerutil.RemoveFinalizer(s.obj, infrav1alpha1.Finalizer)
	if err := r.client.Patch(ctx, s.obj, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("removing the finalizer: %w", err))
	}
	s.released = true
	return nil
}
