package engine

import (
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/engine/objcache"
)

// renderMemo remembers each resource's last render, so that an unchanged resource is never
// rendered twice. Renders are kept encoded and compressed: one is kept for every resource, and
// the renders of one chart differ in little but names, so each is compressed against the first
// (a preset dictionary) to a few hundred bytes instead of kilobytes of maps. Decoding costs far
// less than rendering, and each get hands out copies nobody else holds.
type renderMemo struct {
	mu sync.Mutex
	m  map[types.NamespacedName]rendered
	// codec compresses every render against the first render put.
	codec *objcache.DictCodec
}

// rendered is one resource's last render, encoded and compressed, and the key of the inputs it
// came from.
type rendered struct {
	inputs  string
	objects []byte
}

func (m *renderMemo) get(key types.NamespacedName, inputs string) ([]*unstructured.Unstructured, bool) {
	m.mu.Lock()
	r, ok := m.m[key]
	codec := m.codec
	m.mu.Unlock()
	if !ok || r.inputs != inputs {
		return nil, false
	}
	data, err := codec.Inflate(r.objects)
	if err != nil {
		return nil, false
	}
	objs, err := decodeObjects(data)
	return objs, err == nil
}

func (m *renderMemo) put(key types.NamespacedName, inputs string, objs []*unstructured.Unstructured) {
	data, err := json.Marshal(objs)
	if err != nil {
		return // not remembered: the next reconcile renders again
	}
	m.mu.Lock()
	if m.codec == nil {
		m.codec = objcache.NewDictCodec(data)
	}
	codec := m.codec
	m.mu.Unlock()
	packed, err := codec.Deflate(data)
	if err != nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil {
		m.m = map[types.NamespacedName]rendered{}
	}
	m.m[key] = rendered{inputs: inputs, objects: packed}
}

// decodeObjects reads what put encoded, numbers as int64 where whole, as the API server's are.
func decodeObjects(data []byte) ([]*unstructured.Unstructured, error) {
	var items []any
	if err := utiljson.Unmarshal(data, &items); err != nil {
		return nil, err
	}
	objs := make([]*unstructured.Unstructured, 0, len(items))
	for _, item := range items {
		obj, ok := item.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("a remembered render holds %T, not an object", item)
		}
		objs = append(objs, &unstructured.Unstructured{Object: obj})
	}
	return objs, nil
}

func (m *renderMemo) forget(key types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.m, key)
}

// writeMemo remembers what the reconciler last wrote to each resource. The cache can lag
// behind our own writes; this keeps a stale read from writing the same thing twice.
type writeMemo struct {
	mu sync.Mutex
	m  map[types.NamespacedName]lastWrite
}

// lastWrite is what was last written to one incarnation (UID) of a resource.
type lastWrite struct {
	uid       types.UID
	status    any    // the status as written
	version   string // the resourceVersion the status write returned
	at        time.Time
	finalizer bool // the finalizer was added
	// The first status of generation was first put off at since (statusWriter.firstWait).
	generation int64
	since      time.Time
	// inventory is the children written that no written status records yet: of a status put
	// off, or of a reconcile that met a write conflict. They exist, so teardown and prune must
	// know them.
	inventory *infrav1alpha1.Inventory
}

// get returns what was last written to obj (nothing if obj is a new incarnation).
func (m *writeMemo) get(obj *unstructured.Unstructured) lastWrite {
	m.mu.Lock()
	defer m.mu.Unlock()
	w := m.m[client.ObjectKeyFromObject(obj)]
	if w.uid != obj.GetUID() {
		return lastWrite{}
	}
	return w
}

func (m *writeMemo) record(obj *unstructured.Unstructured, update func(*lastWrite)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil {
		m.m = map[types.NamespacedName]lastWrite{}
	}
	key := client.ObjectKeyFromObject(obj)
	w := m.m[key]
	if w.uid != obj.GetUID() {
		w = lastWrite{uid: obj.GetUID()}
	}
	update(&w)
	m.m[key] = w
}

// putOff records that the first status of obj's generation, with inventory, was put off, and
// returns when it first was.
func (m *writeMemo) putOff(obj *unstructured.Unstructured, inventory *infrav1alpha1.Inventory, now time.Time) time.Time {
	var since time.Time
	m.record(obj, func(w *lastWrite) {
		if w.generation != obj.GetGeneration() || w.since.IsZero() {
			w.generation, w.since = obj.GetGeneration(), now
		}
		w.inventory, since = inventory, w.since
	})
	return since
}

// remember records that obj's children in inventory may exist, though no status says so yet.
func (m *writeMemo) remember(obj *unstructured.Unstructured, inventory *infrav1alpha1.Inventory) {
	m.record(obj, func(w *lastWrite) { w.inventory = mergeInventory(w.inventory, inventory) })
}

func (m *writeMemo) forget(key types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.m, key)
}

// overlay puts the status last written onto obj. The operator is the status's only writer, so
// that is what the server has even when the cache has not caught up; computing from it, and
// patching against it, never repeats or undoes a write.
func (m *writeMemo) overlay(obj *unstructured.Unstructured) error {
	last := m.get(obj)
	if last.status == nil {
		return nil
	}
	if err := unstructured.SetNestedField(obj.Object, runtime.DeepCopyJSONValue(last.status), "status"); err != nil {
		return fmt.Errorf("restoring the last written status: %w", err)
	}
	return nil
}

// caughtUp drops the status last written to obj once the cache holds the object that write
// returned (its resourceVersion): the cache never goes back to an older object, and one status
// per resource is most of what the memo would otherwise hold at rest. The resource informer
// calls it with each object it stores.
func (m *writeMemo) caughtUp(obj *unstructured.Unstructured) {
	m.mu.Lock()
	defer m.mu.Unlock()
	key := client.ObjectKeyFromObject(obj)
	w, ok := m.m[key]
	if !ok || w.uid != obj.GetUID() || w.status == nil || w.version == "" || w.version != obj.GetResourceVersion() {
		return
	}
	w.status = nil
	m.m[key] = w
}
