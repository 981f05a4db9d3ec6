package engine

import (
	"context"
	"fmt"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/engine/objcache"
	"github.com/cloudspace-dev/cloudspace-operator/internal/watches"
)

// owners records, for each live resource the operator serves, its namespace and the children
// it renders (their inventory IDs): the child cache keeps an object whole only when one of
// them holds it (holds, which the cache's transform asks: newChildCache). Which objects are
// held is the engine's rule of ownership; how the rest are trimmed is objcache's (childTrim).
// It is kept from the resource informers (each resource's status inventory) and from each
// reconcile (what it is about to write), so a child's first event finds its holder.
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
	u, ok := objcache.AsUnstructured(obj)
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
