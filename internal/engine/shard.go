package engine

import (
	"maps"

	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
)

// Shards: operators that split a kind between them by the watches.yaml selector each serve what
// matches their selector, and tear down only what they last served (ServedByAnnotation), so no
// operator writes to another's resources, even one being deleted while its own is down.

// serves reports whether obj is this reconciler's to reconcile: it matches the watches.yaml
// selector, or it is being deleted and was last served by us (a resource relabelled out of
// the selector still gets its teardown, but from no other shard).
func (r *reconciler) serves(obj client.Object) bool {
	if r.selector.Matches(labels.Set(obj.GetLabels())) {
		return true
	}
	return !obj.GetDeletionTimestamp().IsZero() && r.claimed(obj)
}

// claimed reports whether obj carries our finalizer, added by an operator with our selector.
func (r *reconciler) claimed(obj client.Object) bool {
	return controllerutil.ContainsFinalizer(obj, infrav1alpha1.Finalizer) &&
		obj.GetAnnotations()[infrav1alpha1.ServedByAnnotation] == r.shard
}

// settled reports whether obj needs nothing from ensureFinalizer: it carries our finalizer and
// names our shard, or it names another shard whose selector still matches it. Shards whose
// selectors overlap would otherwise take it from each other at every turn.
func (r *reconciler) settled(obj client.Object) bool {
	if !controllerutil.ContainsFinalizer(obj, infrav1alpha1.Finalizer) {
		return false
	}
	servedBy, stamped := obj.GetAnnotations()[infrav1alpha1.ServedByAnnotation]
	if servedBy == r.shard {
		return true
	}
	other, err := labels.Parse(servedBy)
	return stamped && err == nil && other.Matches(labels.Set(obj.GetLabels()))
}

// shardOf is what ServedByAnnotation says of the resources an operator with selector serves:
// the selector, or nothing when it serves the whole kind (no write at all for an operator
// without a selector). Computed once: the predicates ask for it on every event.
func shardOf(selector labels.Selector) string {
	if selector.Empty() {
		return ""
	}
	return selector.String()
}

// stampShard sets ServedByAnnotation on obj to our shard, or removes it when we have none.
func (r *reconciler) stampShard(obj client.Object) {
	annotations := maps.Clone(obj.GetAnnotations())
	if r.shard == "" {
		delete(annotations, infrav1alpha1.ServedByAnnotation)
	} else {
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[infrav1alpha1.ServedByAnnotation] = r.shard
	}
	obj.SetAnnotations(annotations)
}
