package engine

import (
	"context"
	"fmt"
	"reflect"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/watches"
)

// AnnotationTrimmed marks an object the child cache holds as a stub: its name, owner and our
// labels, nothing else. The child cache selects on a label anyone may set on their own objects,
// so it keeps whole only what is provably ours; a stub is read from the API server whenever the
// engine needs more than who holds it (getChild).
const AnnotationTrimmed = "infra.cloudspace.dev/cache-trimmed"

// engineLabels are the labels a stub or a trimmed pod keeps: those the engine selects and
// maps on. Any other label is the object author's, unbounded, and never read from the cache.
var engineLabels = []string{LabelManagedBy, LabelName, LabelInstance, LabelPartOf, LabelVersion}

// childReadable is what the child cache's readers need of its objects' metadata: the
// annotations its event handlers map on (toOwner) and that mark stubs, and the labels of pods,
// which are selected and mapped on by label (watchPods, reconciler.pods). The rest, such as a child's
// spec hash, is read from whole objects only: a label selector on another kind in this cache
// would match nothing until that kind is added here.
var childReadable = readable{
	annotation: func(key string) bool { return key == AnnotationRetainedFor || key == AnnotationTrimmed },
	labels:     func(obj any) bool { _, pod := obj.(*corev1.Pod); return pod },
}

// owners records, for each live resource the operator serves, its namespace and the children
// it renders (their inventory IDs): the child cache keeps an object whole only when one of
// them holds it. It is kept from the resource informers (each resource's status inventory) and
// from each reconcile (what it is about to write), so a child's first event finds its holder.
type owners struct {
	mu     sync.RWMutex
	held   map[types.UID]holding
	scheme *runtime.Scheme // the kinds the child cache holds typed
}

// holding is what one resource holds.
type holding struct {
	namespace string
	children  map[string]struct{}
}

func newOwners(scheme *runtime.Scheme) *owners {
	return &owners{held: map[types.UID]holding{}, scheme: scheme}
}

// expect adds children (inventory IDs) to what owner holds.
func (o *owners) expect(owner metav1.Object, children []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	h, ok := o.held[owner.GetUID()]
	if !ok {
		h = holding{namespace: owner.GetNamespace(), children: make(map[string]struct{}, len(children))}
	}
	for _, id := range children {
		h.children[id] = struct{}{}
	}
	o.held[owner.GetUID()] = h
}

func (o *owners) drop(obj any) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if m, ok := obj.(metav1.Object); ok { // the metadata a compact object holds is enough
		o.mu.Lock()
		defer o.mu.Unlock()
		delete(o.held, m.GetUID())
	}
}

// fromInventory records what a resource's status inventory says it holds.
func (o *owners) fromInventory(obj any) {
	u, ok := AsUnstructured(obj)
	if !ok {
		return
	}
	entries, _, _ := unstructured.NestedSlice(u.Object, "status", "inventory", "entries")
	ids := make([]string, 0, len(entries))
	for _, e := range entries {
		if m, ok := e.(map[string]any); ok {
			if id, ok := m["id"].(string); ok {
				ids = append(ids, id)
			}
		}
	}
	o.expect(u, ids)
}

// track keeps the record from every served kind's informer in the manager's cache, and returns
// whether those informers' events have all been handled.
func (o *owners) track(mgr ctrl.Manager, ws []watches.Watch) (func() bool, error) {
	h := toolscache.ResourceEventHandlerFuncs{
		AddFunc:    o.fromInventory,
		UpdateFunc: func(_, obj any) { o.fromInventory(obj) },
		DeleteFunc: o.drop,
	}
	var regs []toolscache.ResourceEventHandlerRegistration
	for _, w := range ws {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(w.GroupVersionKind())
		// Before the manager starts, this registers the informer without waiting for it.
		inf, err := mgr.GetCache().GetInformer(context.Background(), u)
		if err != nil {
			return nil, fmt.Errorf("watching %s for the child cache: %w", w.GroupVersionKind(), err)
		}
		reg, err := inf.AddEventHandler(h)
		if err != nil {
			return nil, fmt.Errorf("tracking %s for the child cache: %w", w.GroupVersionKind(), err)
		}
		regs = append(regs, reg)
	}
	return func() bool {
		for _, r := range regs {
			if !r.HasSynced() {
				return false
			}
		}
		return true
	}, nil
}

// transform is the child cache's transform: managedFields go from everything; an object a
// live resource we serve holds is kept whole; a pod that is not (one the chart's workloads run,
// read for its status) keeps its status and identity; any other object becomes a stub. A
// pod kept in part is marked as a stub is, so that it is never taken for a whole child.
func (o *owners) transform(in any) (any, error) {
	obj, ok := in.(client.Object)
	if !ok {
		return in, nil
	}
	obj.SetManagedFields(nil)
	if o.holds(obj) {
		return obj, nil
	}
	if pod, ok := obj.(*corev1.Pod); ok {
		pod.Spec = corev1.PodSpec{NodeName: pod.Spec.NodeName}
		pod.ObjectMeta = stubMeta(pod)
		return pod, nil
	}
	return stub(obj), nil
}

// holds reports whether a live resource we serve holds obj: one named by its controller
// reference or retained-for record, in its namespace, that rendered an object of its kind and
// name. The reference and the record can be forged by whoever writes obj, but not what the
// resource rendered.
func (o *owners) holds(obj client.Object) bool {
	var uid types.UID
	if ref := metav1.GetControllerOfNoCopy(obj); ref != nil {
		uid = ref.UID
	} else if _, _, u, ok := parseRetainedFor(obj.GetAnnotations()[AnnotationRetainedFor]); ok {
		uid = u
	} else {
		return false
	}
	gvk := o.kindOf(obj)
	o.mu.RLock()
	defer o.mu.RUnlock()
	h, ok := o.held[uid]
	if !ok || h.namespace != obj.GetNamespace() || gvk.Kind == "" {
		return false
	}
	_, ok = h.children[infrav1alpha1.NewInventoryEntry(gvk, obj.GetNamespace(), obj.GetName()).ID]
	return ok
}

// kindOf is obj's kind: set on unstructured objects, from the scheme for typed ones (which the
// informers hand over without it).
func (o *owners) kindOf(obj client.Object) schema.GroupVersionKind {
	if gvk := obj.GetObjectKind().GroupVersionKind(); gvk.Kind != "" {
		return gvk
	}
	if o.scheme == nil {
		return schema.GroupVersionKind{}
	}
	gvks, _, err := o.scheme.ObjectKinds(obj)
	if err != nil || len(gvks) == 0 {
		return schema.GroupVersionKind{}
	}
	return gvks[0]
}

// stub is obj reduced to what says who holds it (stubMeta), with nothing else.
func stub(obj client.Object) client.Object {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		meta := stubMeta(u)
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&meta)
		if err != nil { // ObjectMeta always converts; a name is the least a stub is
			m = map[string]any{"namespace": meta.Namespace, "name": meta.Name, "annotations": map[string]any{AnnotationTrimmed: "true"}}
		}
		su := &unstructured.Unstructured{Object: map[string]any{"metadata": m}}
		su.SetGroupVersionKind(u.GroupVersionKind())
		return su
	}
	s := reflect.New(reflect.TypeOf(obj).Elem()).Interface().(client.Object)
	reflect.ValueOf(s).Elem().FieldByName("ObjectMeta").Set(reflect.ValueOf(stubMeta(obj)))
	return s
}

// stubMeta is obj's metadata reduced to what says who holds it: name, UID, version, the
// engine's labels, the controller reference and retained-for record, marked AnnotationTrimmed.
func stubMeta(obj client.Object) metav1.ObjectMeta {
	m := metav1.ObjectMeta{
		Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: obj.GetUID(),
		ResourceVersion: obj.GetResourceVersion(), DeletionTimestamp: obj.GetDeletionTimestamp(),
		Labels:      keep(obj.GetLabels(), engineLabels),
		Annotations: map[string]string{AnnotationTrimmed: "true"},
	}
	if ref := metav1.GetControllerOfNoCopy(obj); ref != nil {
		m.OwnerReferences = []metav1.OwnerReference{*ref}
	}
	if v, ok := obj.GetAnnotations()[AnnotationRetainedFor]; ok && len(v) <= maxRetainedFor {
		m.Annotations[AnnotationRetainedFor] = v
	}
	return m
}

// maxRetainedFor bounds the retained-for record a stub keeps: a kind key, a name and a UID.
const maxRetainedFor = 512

// trimmed reports whether obj is a stub the child cache made.
func trimmed(obj metav1.Object) bool {
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
