package controllers

import (
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// fromUnstructured decodes obj into out (a pointer) with the default converter. The
// converter's errors do not say where the bad value is ("cannot convert int64 to string"), and
// a spec refused for one must name the field to fix: a failed decode is prefixed with the path
// of the first field that fails on its own ("spec.storage.size: quantities must match ...").
func fromUnstructured(obj map[string]any, out any) error {
	err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, out)
	if err == nil {
		return nil
	}
	decodes := func(partial map[string]any) bool {
		fresh := reflect.New(reflect.TypeOf(out).Elem()).Interface()
		return runtime.DefaultUnstructuredConverter.FromUnstructured(partial, fresh) == nil
	}
	if path := badField(nil, obj, func(v any) map[string]any { m, _ := v.(map[string]any); return m }, decodes); path != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return err
}

// badField returns the path of the first value under v (at path) that does not decode alone,
// or path itself when v's own type is wrong. place puts a value where v stands in an otherwise
// empty object; the converter's errors depend on types only, so one value alone fails as it
// does among the others.
func badField(path *field.Path, v any, place func(any) map[string]any, decodes func(map[string]any) bool) *field.Path {
	switch v := v.(type) {
	case map[string]any:
		if !decodes(place(map[string]any{})) {
			return path // an object where something else belongs
		}
		for _, k := range slices.Sorted(maps.Keys(v)) {
			at := func(x any) map[string]any { return place(map[string]any{k: x}) }
			if !decodes(at(v[k])) {
				return badField(childPath(path, k), v[k], at, decodes)
			}
		}
	case []any:
		if !decodes(place([]any{})) {
			return path // a list where something else belongs
		}
		for i, e := range v {
			at := func(x any) map[string]any { return place([]any{x}) }
			if !decodes(at(e)) {
				return badField(path.Index(i), e, at, decodes)
			}
		}
	}
	return path
}

// childPath is path.name, or path[name] for a map key that is not a field name ("a.b/c").
func childPath(path *field.Path, name string) *field.Path {
	switch {
	case path == nil:
		return field.NewPath(name)
	case !fieldName.MatchString(name):
		return path.Key(name)
	}
	return path.Child(name)
}

var fieldName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
