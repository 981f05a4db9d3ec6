package engine

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
)

// prune deletes the children of the last inventory that the chart no longer renders.
func (r *reconciler) prune(ctx context.Context, s *scope, desired []*unstructured.Unstructured) error {
	if s.status.Inventory == nil {
		return nil
	}
	keep := map[string]bool{}
	for _, d := range desired {
		keep[inventoryEntry(d).ID] = true
	}
	_, err := r.deleteEntries(ctx, s.obj, s.status.Inventory.Entries, keep)
	return err
}

// deleteEntries deletes every entry not kept, and counts those still present.
func (r *reconciler) deleteEntries(ctx context.Context, owner *unstructured.Unstructured, entries []infrav1alpha1.InventoryEntry, kept map[string]bool) (int, error) {
	remaining := 0
	var errs []error
	for _, e := range entries {
		if kept[e.ID] {
			continue
		}
		present, err := r.deleteChild(ctx, owner, e)
		if err != nil {
			errs = append(errs, err)
		}
		if present {
			remaining++
		}
	}
	return remaining, errors.Join(errs...)
}

// deleteChild deletes one inventory entry if it still exists and is still the owner's; it
// reports whether the child is still there. The delete is conditional on the UID that was
// checked, so an object recreated by someone else meanwhile is never deleted.
func (r *reconciler) deleteChild(ctx context.Context, owner *unstructured.Unstructured, e infrav1alpha1.InventoryEntry) (bool, error) {
	like, err := objectFromEntry(e)
	if err != nil {
		return false, err
	}
	current, err := r.getChild(ctx, like)
	if err != nil || current == nil {
		return false, err
	}
	if claimOf(current, owner) != claimOwned {
		return false, nil
	}
	if current.GetDeletionTimestamp() != nil {
		return true, nil
	}
	uid := current.GetUID()
	if err := r.client.Delete(ctx, current, client.PropagationPolicy("Background"), client.Preconditions{UID: &uid}); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return false, nil
		}
		return true, fmt.Errorf("deleting %s: %w", describe(current), err)
	}
	r.event(owner, false, infrav1alpha1.EventChildDeleted, "Deleted %s", describe(current))
	return true, nil
}
