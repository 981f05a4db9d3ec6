// Package objcache is how the operator's caches hold objects in memory, which is most of its
// memory at scale (docs/engine.md, "Memory"): each object compact, its readable metadata as a
// struct and the rest as JSON compressed against an earlier object of its kind (Compact,
// CompactFor, DictCodec), the strings that metadata repeats shared (intern.go), objects that no
// live resource holds as stubs (Trim), and built-in kinds through their Go types, read as
// unstructured (Store). A compact object's readers never see the difference: every Get and List
// decodes a fresh, whole object.
//
// It knows nothing of reconciling: what the engine reads, and who holds what, are given to it.
//
// The package defines no API: controller-gen must not take its compact objects, which embed
// TypeMeta and ObjectMeta, for one.
// +kubebuilder:skip
package objcache

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// compactObject is how the operator's caches hold an object: the part of its metadata that
// informers, selectors, predicates and event handlers read, as a struct, and everything else as
// JSON compressed against an earlier object of its kind (DictCodec). Nested maps cost many times
// that, and the caches hold an object for every resource and child: this is most of the
// operator's memory at scale (docs/engine.md, "Memory").
//
// The cache copies every object it hands out from Get and List with DeepCopyObject, which here
// decodes a fresh object of the type held before compaction; so readers of the cache see whole
// objects and never know. Event handlers and index functions get the compactObject itself and
// read past its metadata through AsUnstructured.
type compactObject struct {
	metav1.TypeMeta
	// ObjectMeta is the object's metadata as readable (compactor): no managed fields, and only
	// the annotations and labels the cache's readers need from it.
	metav1.ObjectMeta
	// rest is the object's JSON without its metadata, except the labels and annotations
	// ObjectMeta lacks; compressed with codec, when there is one.
	rest  []byte
	codec *DictCodec
	// typ is the Go type the object was decoded into; nil for unstructured.
	typ reflect.Type
}

var _ runtime.Object = &compactObject{}

// DeepCopyObject is the object whole, decoded afresh: nothing it returns is shared.
func (c *compactObject) DeepCopyObject() runtime.Object {
	obj, err := c.expand()
	if err != nil {
		// rest is what json.Marshal and flate wrote of this very type, so it always decodes.
		panic(fmt.Sprintf("decoding the cached %s %s/%s: %v", c.Kind, c.Namespace, c.Name, err))
	}
	return obj
}

// expand rebuilds the object: rest decoded, with the metadata put back.
func (c *compactObject) expand() (runtime.Object, error) {
	data := c.rest
	if c.codec != nil {
		var err error
		if data, err = c.codec.Inflate(c.rest); err != nil {
			return nil, err
		}
	}
	meta := c.ObjectMeta.DeepCopy()
	if c.typ == nil {
		return c.expandUnstructured(data, meta)
	}
	v := reflect.New(c.typ)
	if err := json.Unmarshal(data, v.Interface()); err != nil {
		return nil, err
	}
	field := v.Elem().FieldByName("ObjectMeta")
	rest := field.Interface().(metav1.ObjectMeta)
	meta.Labels = joined(meta.Labels, rest.Labels)
	meta.Annotations = joined(meta.Annotations, rest.Annotations)
	field.Set(reflect.ValueOf(*meta))
	obj := v.Interface().(runtime.Object)
	obj.GetObjectKind().SetGroupVersionKind(c.GroupVersionKind())
	return obj, nil
}

func (c *compactObject) expandUnstructured(data []byte, meta *metav1.ObjectMeta) (runtime.Object, error) {
	m := map[string]any{}
	if err := utiljson.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	restMeta, _ := m["metadata"].(map[string]any)
	meta.Labels = joined(meta.Labels, stringMap(restMeta["labels"]))
	meta.Annotations = joined(meta.Annotations, stringMap(restMeta["annotations"]))
	mm, err := runtime.DefaultUnstructuredConverter.ToUnstructured(meta)
	if err != nil {
		return nil, err
	}
	if mm["creationTimestamp"] == nil { // a zero time converts to null; the API omits it
		delete(mm, "creationTimestamp")
	}
	m["metadata"] = mm
	u := &unstructured.Unstructured{Object: m}
	u.GetObjectKind().SetGroupVersionKind(c.GroupVersionKind())
	return u, nil
}

// joined is the entries of a and b together; a itself when b has none.
func joined(a, b map[string]string) map[string]string {
	if len(b) == 0 {
		return a
	}
	out := make(map[string]string, len(a)+len(b))
	maps.Copy(out, a)
	maps.Copy(out, b)
	return out
}

// stringMap is an unstructured map of strings as one.
func stringMap(v any) map[string]string {
	m, _ := v.(map[string]any)
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, e := range m {
		if s, ok := e.(string); ok {
			out[k] = s
		}
	}
	return out
}

// AsUnstructured is an object an informer's event handler or an index function was handed
// (an object, compact or not, or a deletion's last known state), as unstructured; false when it
// is none of those, or was held typed.
func AsUnstructured(obj any) (*unstructured.Unstructured, bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if c, ok := obj.(*compactObject); ok && c.typ == nil {
		obj = c.DeepCopyObject()
	}
	u, ok := obj.(*unstructured.Unstructured)
	return u, ok
}

// Whole is an object an informer's event handler was handed, whole: a compact object decoded
// afresh, as Get and List hand it out; any other object as it is.
func Whole(obj client.Object) client.Object {
	if c, ok := obj.(*compactObject); ok {
		if whole, ok := c.DeepCopyObject().(client.Object); ok {
			return whole
		}
	}
	return obj
}

// Readable is what a cache's readers need of its objects' metadata, which a compact object
// keeps in its ObjectMeta; the rest of the metadata goes with the content.
type Readable struct {
	// Annotation says which annotations are read; nil: all.
	Annotation func(key string) bool
	// Labels says whose labels are read (selected, mapped on); nil: everyone's.
	Labels func(obj any) bool
}

// compactor turns decoded objects into compact ones, sharing the strings their metadata repeat.
type compactor struct {
	readable Readable
	in       *interner
	codecs   sync.Map // a kind (reflect.Type, or GroupVersionKind for unstructured) → *DictCodec
}

// minDict is the shortest content that becomes its kind's dictionary; shorter content (a stub's)
// is kept as it is.
const minDict = 64

// compact is obj as a compactObject; anything else than an object with ObjectMeta is left as it
// is, and so is an object already compact (a cache may transform an object twice).
func (c *compactor) compact(obj any) (any, error) {
	switch o := obj.(type) {
	case *compactObject:
		return o, nil
	case *unstructured.Unstructured:
		return c.unstructured(o)
	}
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return obj, nil
	}
	field := v.Elem().FieldByName("ObjectMeta")
	if !field.IsValid() || field.Type() != reflect.TypeFor[metav1.ObjectMeta]() {
		return obj, nil
	}
	return c.typed(obj.(runtime.Object), v.Elem(), field)
}

// typed compacts an object of a Go type; obj is the cache's own, so it is taken apart in place.
func (c *compactor) typed(obj runtime.Object, v, field reflect.Value) (any, error) {
	out := &compactObject{TypeMeta: typeMetaOf(obj), typ: v.Type()}
	var restMeta metav1.ObjectMeta
	out.ObjectMeta, restMeta = c.split(obj, field.Interface().(metav1.ObjectMeta))
	field.Set(reflect.ValueOf(restMeta))
	obj.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("compacting %s/%s: %w", out.Namespace, out.Name, err)
	}
	return out, c.pack(out, v.Type(), data)
}

// unstructured compacts an unstructured object.
func (c *compactor) unstructured(u *unstructured.Unstructured) (any, error) {
	var meta metav1.ObjectMeta
	if m, ok := u.Object["metadata"].(map[string]any); ok {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &meta); err != nil {
			return nil, fmt.Errorf("compacting %s/%s: %w", u.GetNamespace(), u.GetName(), err)
		}
	}
	out := &compactObject{TypeMeta: metav1.TypeMeta{APIVersion: c.in.str(u.GetAPIVersion()), Kind: c.in.str(u.GetKind())}}
	var restMeta metav1.ObjectMeta
	out.ObjectMeta, restMeta = c.split(u, meta)
	rest := make(map[string]any, len(u.Object))
	for k, v := range u.Object {
		if k != "metadata" && k != "apiVersion" && k != "kind" {
			rest[k] = v
		}
	}
	if len(restMeta.Labels)+len(restMeta.Annotations) > 0 {
		rest["metadata"] = metav1.ObjectMeta{Labels: restMeta.Labels, Annotations: restMeta.Annotations}
	}
	data, err := json.Marshal(rest)
	if err != nil {
		return nil, fmt.Errorf("compacting %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	return out, c.pack(out, u.GroupVersionKind(), data)
}

// pack stores data as out's rest, compressed against the first content of its kind long
// enough to be a dictionary.
func (c *compactor) pack(out *compactObject, kind any, data []byte) error {
	codec, ok := c.codecs.Load(kind)
	if !ok {
		if len(data) < minDict {
			out.rest = data
			return nil
		}
		codec, _ = c.codecs.LoadOrStore(kind, NewDictCodec(data))
	}
	packed, err := codec.(*DictCodec).Deflate(data)
	if err != nil {
		return fmt.Errorf("compacting %s/%s: %w", out.Namespace, out.Name, err)
	}
	out.rest, out.codec = packed, codec.(*DictCodec)
	return nil
}

// split is meta as a compact object keeps it (readable, with shared strings), and the labels
// and annotations it does not keep, as metadata to keep with the content.
func (c *compactor) split(obj any, meta metav1.ObjectMeta) (metav1.ObjectMeta, metav1.ObjectMeta) {
	var rest metav1.ObjectMeta
	meta.ManagedFields = nil
	if c.readable.Labels != nil && !c.readable.Labels(obj) {
		meta.Labels, rest.Labels = nil, meta.Labels
	}
	if c.readable.Annotation != nil && len(meta.Annotations) > 0 {
		kept := map[string]string{}
		for k, v := range meta.Annotations {
			if c.readable.Annotation(k) {
				kept[k] = v
			} else {
				if rest.Annotations == nil {
					rest.Annotations = map[string]string{}
				}
				rest.Annotations[k] = v
			}
		}
		meta.Annotations = nil
		if len(kept) > 0 {
			meta.Annotations = kept
		}
	}
	c.in.typed(reflect.ValueOf(&meta))
	meta.Labels = c.in.strMap(meta.Labels)
	return meta, rest
}

// typeMetaOf is obj's apiVersion and kind, as set (informers of Go types leave them empty).
func typeMetaOf(obj runtime.Object) metav1.TypeMeta {
	gvk := obj.GetObjectKind().GroupVersionKind()
	apiVersion, kind := gvk.ToAPIVersionAndKind()
	return metav1.TypeMeta{APIVersion: apiVersion, Kind: kind}
}

// Compact is a cache transform that, after next, holds each object as a compactObject whose
// metadata is readable whole. The manager's cache uses it (app.CacheOptions).
func Compact(next cache.TransformFunc) cache.TransformFunc {
	return CompactFor(next, Readable{})
}

// CompactFor is Compact keeping in each ObjectMeta only what r says is read: the engine's child
// cache, whose handlers read a few annotations of most objects and the labels of pods alone.
func CompactFor(next cache.TransformFunc, r Readable) cache.TransformFunc {
	c := &compactor{readable: r, in: newInterner()}
	return func(obj any) (any, error) {
		if _, done := obj.(*compactObject); done {
			return obj, nil
		}
		if next != nil {
			var err error
			if obj, err = next(obj); err != nil {
				return obj, err
			}
		}
		return c.compact(obj)
	}
}
