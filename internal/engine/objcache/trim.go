package objcache

import (
	"reflect"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// AnnotationTrimmed marks an object a cache holds as a stub: its name, owner and a few labels,
// nothing else. A cache that selects on a label anyone may set on their own objects keeps whole
// only what is provably its reader's; a stub is read from the API server whenever the reader
// needs more than who holds it.
const AnnotationTrimmed = "infra.cloudspace.dev/cache-trimmed"

// Trim says what a stub keeps of an object besides who it is (namespace, name, UID, version,
// deletion, controller reference): the labels its readers select and map on, and the
// annotations that say who holds it. Any other label or annotation is the object author's,
// unbounded, and never read from the cache.
type Trim struct {
	// Labels are the label keys a stub keeps.
	Labels []string
	// Annotations are the annotation keys a stub keeps, each while its value is at most
	// maxKeptAnnotation bytes: a record of who holds the object, never data.
	Annotations []string
}

// maxKeptAnnotation bounds an annotation a stub keeps: a kind key, a name and a UID.
const maxKeptAnnotation = 512

// Transform is a cache transform for a cache whose objects anyone may label: managedFields go
// from everything; an object held (as holds says) is kept whole; a pod that is not (one a
// workload runs, read for its status) keeps its status, identity and creation time (a start's
// phases are measured from it); any other object becomes a stub. A pod kept in part is marked
// as a stub is, so that it is never taken for a whole object.
func (t Trim) Transform(holds func(client.Object) bool) cache.TransformFunc {
	return func(in any) (any, error) {
		obj, ok := in.(client.Object)
		if !ok {
			return in, nil
		}
		obj.SetManagedFields(nil)
		if holds(obj) {
			return obj, nil
		}
		if pod, ok := obj.(*corev1.Pod); ok {
			created := pod.CreationTimestamp
			pod.Spec = corev1.PodSpec{NodeName: pod.Spec.NodeName}
			pod.ObjectMeta = t.stubMeta(pod)
			pod.CreationTimestamp = created
			return pod, nil
		}
		return t.stub(obj), nil
	}
}

// stub is obj reduced to what says who holds it (stubMeta), with nothing else.
func (t Trim) stub(obj client.Object) client.Object {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		meta := t.stubMeta(u)
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&meta)
		if err != nil { // ObjectMeta always converts; a name is the least a stub is
			m = map[string]any{"namespace": meta.Namespace, "name": meta.Name, "annotations": map[string]any{AnnotationTrimmed: "true"}}
		}
		su := &unstructured.Unstructured{Object: map[string]any{"metadata": m}}
		su.SetGroupVersionKind(u.GroupVersionKind())
		return su
	}
	s := reflect.New(reflect.TypeOf(obj).Elem()).Interface().(client.Object)
	reflect.ValueOf(s).Elem().FieldByName("ObjectMeta").Set(reflect.ValueOf(t.stubMeta(obj)))
	return s
}

// stubMeta is obj's metadata reduced to what says who holds it: name, UID, version, the kept
// labels, the controller reference and the kept annotations, marked AnnotationTrimmed.
func (t Trim) stubMeta(obj client.Object) metav1.ObjectMeta {
	m := metav1.ObjectMeta{
		Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: obj.GetUID(),
		ResourceVersion: obj.GetResourceVersion(), DeletionTimestamp: obj.GetDeletionTimestamp(),
		Labels:      keep(obj.GetLabels(), t.Labels),
		Annotations: map[string]string{AnnotationTrimmed: "true"},
	}
	if ref := metav1.GetControllerOfNoCopy(obj); ref != nil {
		m.OwnerReferences = []metav1.OwnerReference{*ref}
	}
	for _, k := range t.Annotations {
		if v, ok := obj.GetAnnotations()[k]; ok && len(v) <= maxKeptAnnotation {
			m.Annotations[k] = v
		}
	}
	return m
}

// Trimmed reports whether obj is a stub a Trim made, or a pod it kept in part.
func Trimmed(obj metav1.Object) bool {
	return obj.GetAnnotations()[AnnotationTrimmed] == "true"
}

// keep is the entries of m whose keys are listed; nil when none.
func keep(m map[string]string, keys []string) map[string]string {
	var out map[string]string
	for _, k := range keys {
		if v, ok := m[k]; ok {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}
