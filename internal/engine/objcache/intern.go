package objcache

import (
	"hash/maphash"
	"maps"
	"reflect"
	"sync/atomic"
)

// interner shares one copy of the strings and label maps cached objects repeat in their
// metadata (compact.go): label keys and values, kinds, owner references, which a decoder
// allocates afresh for every object. The table is direct-mapped and fixed in size, so it
// stays bounded whatever anyone writes: a string that collides with another replaces it, and
// the objects already holding the old copy keep theirs.
type interner struct {
	seed  maphash.Seed
	slots [1 << 12]atomic.Pointer[internEntry]
	maps  [1 << 10]atomic.Pointer[map[string]string]
}

// internEntry is a shared string.
type internEntry struct{ s string }

// maxInterned is the longest string shared; longer ones are names, hashes and data, rarely
// repeated.
const maxInterned = 64

func newInterner() *interner { return &interner{seed: maphash.MakeSeed()} }

func (in *interner) entry(s string) *internEntry {
	slot := &in.slots[maphash.String(in.seed, s)&(uint64(len(in.slots))-1)]
	if e := slot.Load(); e != nil && e.s == s {
		return e
	}
	e := &internEntry{s: s}
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

// maxSharedMap is the most entries a shared map of strings has: labels the engine and charts
// set, which the children of one resource repeat.
const maxSharedMap = 16

// strMap is the shared copy of m, a map of strings (labels) no one writes to: the first map
// seen with the same entries. Maps with more than maxSharedMap entries are not shared.
func (in *interner) strMap(m map[string]string) map[string]string {
	if len(m) == 0 || len(m) > maxSharedMap {
		return m
	}
	var h maphash.Hash
	h.SetSeed(in.seed)
	var sum uint64 // of each entry's hash: the same whatever order the map is read in
	for k, v := range m {
		h.Reset()
		h.WriteString(k)
		h.WriteByte(0)
		h.WriteString(v)
		sum += h.Sum64()
	}
	slot := &in.maps[sum&(uint64(len(in.maps))-1)]
	if shared := slot.Load(); shared != nil && maps.Equal(*shared, m) {
		return *shared
	}
	slot.Store(&m)
	return m
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
