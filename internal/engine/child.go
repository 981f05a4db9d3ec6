package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
)

// Labels and annotations the engine puts on every child.
const (
	// LabelManagedBy marks children of this operator; the child cache selects on it.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedByValue is LabelManagedBy's value.
	ManagedByValue = "cloudspace-operator"
	// LabelInstance is the name of the custom resource a child belongs to.
	LabelInstance = "app.kubernetes.io/instance"
	// LabelName is the chart's name, unless the chart sets its own.
	LabelName = "app.kubernetes.io/name"
	// LabelPartOf groups everything the operator runs.
	LabelPartOf = "app.kubernetes.io/part-of"
	// LabelVersion is the chart's version.
	LabelVersion = "app.kubernetes.io/version"
	// AnnotationSpecHash is the hash of the child as last rendered. A child whose annotation
	// matches and whose fields still hold the rendered values needs no write.
	AnnotationSpecHash = "infra.cloudspace.dev/spec-hash"
	// AnnotationRetainedFor marks a child that the kind keeps after its resource is deleted
	// (Retainer): "<kind>.<group>/<name>/<uid>" of that resource. Such a child has no
	// owner reference, so the garbage collector never deletes it; this annotation is what makes
	// it the resource's, and, once the resource is gone, what lets a later resource of the same
	// kind and name adopt it (Adopter).
	AnnotationRetainedFor = "infra.cloudspace.dev/retained-for"
	// AnnotationReleasedAt is when a retained child was released: its resource deleted, the
	// child kept (RFC 3339). How long a kept child has gone unclaimed counts from it.
	AnnotationReleasedAt = "infra.cloudspace.dev/released-at"
	// AnnotationReplace, set by a chart on a child whose changes cannot be applied in place
	// (a bare Pod: most of its spec is immutable), asks the engine to delete the child when it
	// changes and to create it afresh once it is gone. Its value is ReplaceOnChange.
	AnnotationReplace = "infra.cloudspace.dev/replace"
	// ReplaceOnChange is AnnotationReplace's value.
	ReplaceOnChange = "OnChange"
)

// decorate sets the engine's labels, its owner record and the spec hash on a rendered child.
// A child the kind retains carries no owner reference (the garbage collector would delete it
// with its owner) but the AnnotationRetainedFor annotation instead.
func decorate(child, owner *unstructured.Unstructured, chartName, chartVersion string, retained bool) error {
	labels := child.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[LabelManagedBy] = ManagedByValue
	labels[LabelInstance] = owner.GetName()
	labels[LabelPartOf] = "cloudspace"
	if _, set := labels[LabelName]; !set {
		labels[LabelName] = chartName
	}
	if _, set := labels[LabelVersion]; !set {
		labels[LabelVersion] = chartVersion
	}
	child.SetLabels(labels)
	if retained {
		child.SetOwnerReferences(nil)
		setAnnotation(child, AnnotationRetainedFor, retainedFor(owner))
	} else {
		child.SetOwnerReferences([]metav1.OwnerReference{ownerReference(owner)})
	}
	h, err := specHash(child)
	if err != nil {
		return fmt.Errorf("hashing %s: %w", describe(child), err)
	}
	setAnnotation(child, AnnotationSpecHash, h)
	return nil
}

func setAnnotation(obj *unstructured.Unstructured, key, value string) {
	annotations := obj.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[key] = value
	obj.SetAnnotations(annotations)
}

func ownerReference(owner *unstructured.Unstructured) metav1.OwnerReference {
	yes := true
	return metav1.OwnerReference{
		APIVersion: owner.GetAPIVersion(), Kind: owner.GetKind(), Name: owner.GetName(), UID: owner.GetUID(),
		Controller: &yes, BlockOwnerDeletion: &yes,
	}
}

// kindKey names a kind the way the engine's controllers and retained children do:
// "genericdaemon.infra.cloudspace.dev".
func kindKey(gvk schema.GroupVersionKind) string {
	return strings.ToLower(gvk.Kind) + "." + gvk.Group
}

// retainedFor is the AnnotationRetainedFor value naming owner: "<kind key>/<name>/<uid>".
func retainedFor(owner *unstructured.Unstructured) string {
	return kindKey(owner.GroupVersionKind()) + "/" + owner.GetName() + "/" + string(owner.GetUID())
}

// parseRetainedFor splits an AnnotationRetainedFor value; ok is false when it is malformed.
func parseRetainedFor(v string) (kind, name string, uid types.UID, ok bool) {
	parts := strings.Split(v, "/")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return "", "", "", false
	}
	return parts[0], parts[1], types.UID(parts[2]), true
}

// claim is how an existing object in a child's place stands to the custom resource.
type claim int

const (
	// claimForeign: someone else's. The engine never writes or deletes it.
	claimForeign claim = iota
	// claimOwned: the resource's own child (its controller, or the resource it is retained for).
	claimOwned
	// claimRetained: retained for an earlier resource of the same kind and name, now gone;
	// adoptable when the kind's lifecycle agrees.
	claimRetained
)

// claimOf tells whether obj is owner's: the one rule of ownership in the engine.
func claimOf(obj metav1.Object, owner *unstructured.Unstructured) claim {
	if ref := metav1.GetControllerOfNoCopy(obj); ref != nil {
		if ref.UID == owner.GetUID() {
			return claimOwned
		}
		return claimForeign
	}
	kind, name, uid, ok := parseRetainedFor(obj.GetAnnotations()[AnnotationRetainedFor])
	switch {
	case !ok || kind != kindKey(owner.GroupVersionKind()) || name != owner.GetName():
		return claimForeign
	case uid == owner.GetUID():
		return claimOwned
	default:
		return claimRetained
	}
}

// ownerOf says who holds obj, for conflict messages: "controlled by Deployment web", "retained
// for workspace.infra.cloudspace.dev x", or "not controlled by any resource".
func ownerOf(obj metav1.Object) string {
	if ref := metav1.GetControllerOfNoCopy(obj); ref != nil {
		return fmt.Sprintf("controlled by %s %s", ref.Kind, ref.Name)
	}
	if kind, name, _, ok := parseRetainedFor(obj.GetAnnotations()[AnnotationRetainedFor]); ok {
		return fmt.Sprintf("retained for %s %s", kind, name)
	}
	return "not controlled by any resource"
}

// specHash hashes the child without its hash annotation (JSON map keys are sorted).
func specHash(child *unstructured.Unstructured) (string, error) {
	c := child.DeepCopy()
	unstructured.RemoveNestedField(c.Object, "metadata", "annotations", AnnotationSpecHash)
	data, err := json.Marshal(c.Object)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])[:16], nil
}

// upToDate reports whether live still holds everything desired sets: the same spec hash, every
// rendered field with the rendered value and our labels and annotations. Fields the API server
// defaulted, and fields other managers own, are ignored; whose live is, claimOf decides.
// stored is desired as the API server stores it (nil: as rendered): a rendered field it does not
// hold, such as readOnly: false for a type that omits it when empty, is not missing from live.
func upToDate(desired, stored, live *unstructured.Unstructured) bool {
	if live == nil || live.GetAnnotations()[AnnotationSpecHash] != desired.GetAnnotations()[AnnotationSpecHash] {
		return false
	}
	if stored == nil {
		stored = desired
	}
	dm, _ := desired.Object["metadata"].(map[string]any)
	sm, _ := stored.Object["metadata"].(map[string]any)
	lm, _ := live.Object["metadata"].(map[string]any)
	if !subset(dm["labels"], sm["labels"], lm["labels"]) || !subset(dm["annotations"], sm["annotations"], lm["annotations"]) {
		return false
	}
	for k, v := range desired.Object {
		if k == "metadata" || k == "status" {
			continue
		}
		if !subset(v, stored.Object[k], live.Object[k]) {
			return false
		}
	}
	return true
}

// subset reports whether every field of want is in have with an equal value. Lists must have
// the same length, element by element; empty values match missing ones (the API server drops
// them), and so does a field missing from stored, want's stored form; quantities compare by
// value ("0.5" equals "500m").
func subset(want, stored, have any) bool {
	if have == nil && stored == nil {
		return true
	}
	switch w := want.(type) {
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			return have == nil && len(w) == 0
		}
		s, _ := stored.(map[string]any)
		for k, wv := range w {
			if !subset(wv, s[k], h[k]) {
				return false
			}
		}
		return true
	case []any:
		h, ok := have.([]any)
		if !ok {
			return have == nil && len(w) == 0
		}
		if len(h) != len(w) {
			return false
		}
		s, _ := stored.([]any)
		for i := range w {
			var si any
			if i < len(s) {
				si = s[i]
			}
			if !subset(w[i], si, h[i]) {
				return false
			}
		}
		return true
	case nil:
		return true
	default:
		return scalarEqual(want, have)
	}
}

func scalarEqual(want, have any) bool {
	if want == have {
		return true
	}
	if wf, ok := number(want); ok {
		hf, ok := number(have)
		return ok && wf == hf
	}
	ws, ok1 := want.(string)
	hs, ok2 := have.(string)
	if !ok1 || !ok2 {
		return false
	}
	wq, err1 := resource.ParseQuantity(ws)
	hq, err2 := resource.ParseQuantity(hs)
	return err1 == nil && err2 == nil && wq.Cmp(hq) == 0
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case int:
		return float64(n), true
	case int32:
		return float64(n), true
	case float64:
		return n, true
	}
	return 0, false
}

// describe names a child for messages and events: "DaemonSet syslog".
func describe(obj *unstructured.Unstructured) string {
	return obj.GetKind() + " " + obj.GetName()
}

// inventoryEntry records a child in the inventory.
func inventoryEntry(obj *unstructured.Unstructured) infrav1alpha1.InventoryEntry {
	return infrav1alpha1.NewInventoryEntry(obj.GroupVersionKind(), obj.GetNamespace(), obj.GetName())
}

// inventoryIDs are the inventory IDs of objs.
func inventoryIDs(objs []*unstructured.Unstructured) []string {
	ids := make([]string, len(objs))
	for i, o := range objs {
		ids[i] = inventoryEntry(o).ID
	}
	return ids
}

// objectFromEntry is an empty object with the entry's identity.
func objectFromEntry(e infrav1alpha1.InventoryEntry) (*unstructured.Unstructured, error) {
	gvk, namespace, name, err := e.Object()
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(namespace)
	u.SetName(name)
	return u, nil
}
