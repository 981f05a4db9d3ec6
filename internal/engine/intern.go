package engine

import (
	"hash/maphash"
	"reflect"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"
)

// interner shares one copy of the strings cached objects repeat: keys and values a decoder
// allocates afresh for every object (field names, labels, kinds, condition types and reasons)
// are most of what a small object costs. The table is direct-mapped and fixed in size, so it
// stays bounded whatever anyone writes: a string that collides with another replaces it, and
// the objects already holding the old copy keep theirs.
type interner struct {
	seed  maphash.Seed
	slots [1 << 12]atomic.Pointer[internEntry]
}

// internEntry is a shared string and the same string as an interface value, so that the
// unstructured objects that hold it share its box too.
type internEntry struct {
	s string
	v any
}

// maxInterned is the longest string shared; longer ones are names, hashes and data, rarely
// repeated.
const maxInterned = 64

func newInterner() *interner { return &interner{seed: maphash.MakeSeed()} }

func (in *interner) entry(s string) *internEntry {
	slot := &in.slots[maphash.String(in.seed, s)&(uint64(len(in.slots))-1)]
	if e := slot.Load(); e != nil && e.s == s {
		return e
	}
	e := &internEntry{s: s, v: s}
	slot.Store(e)
	return e
}

// str is the shared copy of s.
func (in *interner) str(s string) string {
	if len(s) == 0 || len(s) > maxInterned {
		return s
	}
	return in.entry(s).s
}

// json returns v, a value of an unstructured object, with its keys and short strings shared.
// Maps are rebuilt with the shared keys; v itself is not used again.
func (in *interner) json(v any) any {
	switch t := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(t))
		for k, e := range t {
			m[in.str(k)] = in.json(e)
		}
		return m
	case []any:
		for i, e := range t {
			t[i] = in.json(e)
		}
		return t
	case string:
		if len(t) == 0 || len(t) > maxInterned {
			return t
		}
		return in.entry(t).v
	}
	return v
}

// typed shares the strings of a typed object's exported string fields, string slices and
// string maps, in place. Interfaces are left alone: what they hold cannot be set in place.
func (in *interner) typed(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			in.typed(v.Elem())
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if f := v.Field(i); f.CanSet() {
				in.typed(f)
			}
		}
	case reflect.Slice:
		if k := v.Type().Elem().Kind(); k != reflect.Struct && k != reflect.String && k != reflect.Pointer {
			return // bytes and numbers: nothing to share, and possibly much to walk
		}
		for i := range v.Len() {
			in.typed(v.Index(i))
		}
	case reflect.String:
		if s := v.String(); v.CanSet() && len(s) <= maxInterned {
			v.SetString(in.str(s))
		}
	case reflect.Map:
		in.typedMap(v)
	}
}

// typedMap rebuilds a map of strings with shared keys and values; other maps are left alone.
func (in *interner) typedMap(v reflect.Value) {
	if v.IsNil() || v.Type().Key().Kind() != reflect.String || v.Type().Elem().Kind() != reflect.String || !v.CanSet() {
		return
	}
	m := reflect.MakeMapWithSize(v.Type(), v.Len())
	for it := v.MapRange(); it.Next(); {
		k, e := it.Key(), it.Value()
		m.SetMapIndex(reflect.ValueOf(in.str(k.String())).Convert(k.Type()), reflect.ValueOf(in.str(e.String())).Convert(e.Type()))
	}
	v.Set(m)
}

// object shares obj's strings: an unstructured object's whole content, a typed one's fields.
func (in *interner) object(obj any) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		u.Object, _ = in.json(u.Object).(map[string]any)
		return
	}
	if v := reflect.ValueOf(obj); v.Kind() == reflect.Pointer && !v.IsNil() {
		in.typed(v)
	}
}

// SharedStrings is a cache transform that, after next, makes the objects a cache keeps share
// the strings they repeat (interner). The engine's child cache uses it; the manager's cache,
// which holds the custom resources, should too (app.CacheOptions).
func SharedStrings(next cache.TransformFunc) cache.TransformFunc {
	in := newInterner()
	return func(obj any) (any, error) {
		if next != nil {
			var err error
			if obj, err = next(obj); err != nil {
				return obj, err
			}
		}
		in.object(obj)
		return obj, nil
	}
}
