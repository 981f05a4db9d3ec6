// Package decode decodes objects into their Go types with errors that name the field at fault,
// for the lifecycles (FromUnstructured) and the admission webhooks (Webhook).
package decode

import (
	"context"
	"encoding/json"
	"maps"
	"reflect"
	"regexp"
	"slices"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// Decoding an object into its Go type fails on a value the type cannot hold (a quantity or a
// duration that is not one, a fraction where a whole number belongs, a string where a list
// belongs), and the decoders' errors do not say where the value is ("quantities must match the
// regular expression ...", "cannot convert int64 to string"). A spec refused for one must name
// the field to fix, as every other refusal does: undecodableFields finds each value that fails
// on its own and reports it as field.Invalid ("spec.memory: Invalid value: \"abc\": quantities
// must match ..."). The Go lifecycles (FromUnstructured) and the admission webhooks
// (Webhook) report decode failures through it.

// FromUnstructured decodes obj into out (a pointer) with the default converter; a failed decode
// is the list of the fields at fault, or the converter's error when no field can be blamed.
func FromUnstructured(obj map[string]any, out any) error {
	err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, out)
	if err == nil {
		return nil
	}
	if errs := undecodableFields(obj, convertsTo(reflect.TypeOf(out).Elem())); len(errs) > 0 {
		return errs.ToAggregate()
	}
	return err
}

// A decoder decodes an object, or a part of one, into a fresh value of one Go type.
type decoder func(obj map[string]any) error

// convertsTo decodes into a t with the default unstructured converter, as the lifecycles do.
func convertsTo(t reflect.Type) decoder {
	return func(obj map[string]any) error {
		return runtime.DefaultUnstructuredConverter.FromUnstructured(obj, reflect.New(t).Interface())
	}
}

// unmarshalsTo decodes into a t from JSON, as an admission webhook's decoder does (the JSON
// serializer, not strict, is apimachinery's json.Unmarshal).
func unmarshalsTo(t reflect.Type) decoder {
	return func(obj map[string]any) error {
		data, err := json.Marshal(obj)
		if err != nil {
			return err
		}
		return utiljson.Unmarshal(data, reflect.New(t).Interface())
	}
}

// undecodableFields names each value of obj that decode refuses on its own: the innermost such
// value, or an object or list that stands where something else belongs, each as field.Invalid
// with decode's error for that value alone. It is empty when decode accepts obj, or when no
// single value can be blamed. A value is decoded alone in an otherwise empty object: the
// decoders' errors depend on types only, so it fails alone as it does among the others.
func undecodableFields(obj map[string]any, decode decoder) field.ErrorList {
	if decode(obj) == nil {
		return nil
	}
	var errs field.ErrorList
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		errs = append(errs, blame(childPath(nil, k), obj[k], func(x any) map[string]any { return map[string]any{k: x} }, decode)...)
	}
	return errs
}

// blame is undecodableFields for v, at path; place puts a value where v stands in an
// otherwise empty object.
func blame(path *field.Path, v any, place func(any) map[string]any, decode decoder) field.ErrorList {
	err := decode(place(v))
	if err == nil {
		return nil
	}
	var errs field.ErrorList
	switch v := v.(type) {
	case map[string]any:
		if decode(place(map[string]any{})) != nil {
			return field.ErrorList{field.Invalid(path, "object", err.Error())} // where something else belongs
		}
		for _, k := range slices.Sorted(maps.Keys(v)) {
			at := func(x any) map[string]any { return place(map[string]any{k: x}) }
			errs = append(errs, blame(childPath(path, k), v[k], at, decode)...)
		}
	case []any:
		if decode(place([]any{})) != nil {
			return field.ErrorList{field.Invalid(path, "array", err.Error())}
		}
		for i, e := range v {
			at := func(x any) map[string]any { return place([]any{x}) }
			errs = append(errs, blame(path.Index(i), e, at, decode)...)
		}
	default:
		return field.ErrorList{field.Invalid(path, v, err.Error())}
	}
	if len(errs) == 0 { // no part fails alone: the whole is blamed
		return field.ErrorList{field.Invalid(path, "object", err.Error())}
	}
	return errs
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

// Webhook makes wh, a webhook over objects of kind whose Go type is proto's, refuse an
// object that type cannot hold with each field at fault named, before wh's own decoder refuses
// it without saying where. A mutating webhook is called before the API server checks the CRD's
// schema, so it is the first to meet such a value ("spec.memory: abc").
func Webhook(wh *admission.Webhook, kind schema.GroupKind, proto runtime.Object) *admission.Webhook {
	wh.Handler = decodeChecked{kind: kind, typ: reflect.TypeOf(proto).Elem(), next: wh.Handler}
	return wh
}

type decodeChecked struct {
	kind schema.GroupKind
	typ  reflect.Type
	next admission.Handler
}

func (h decodeChecked) Handle(ctx context.Context, req admission.Request) admission.Response {
	if errs := h.undecodable(req.Object.Raw); len(errs) > 0 {
		st := apierrors.NewInvalid(h.kind, req.Name, errs).Status()
		return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: false, Result: &st}}
	}
	return h.next.Handle(ctx, req)
}

// undecodable is the fields of raw that the webhook's decoder cannot hold; none when it decodes
// (or is no JSON object: the next handler's decoder says why).
func (h decodeChecked) undecodable(raw []byte) field.ErrorList {
	if len(raw) == 0 || utiljson.Unmarshal(raw, reflect.New(h.typ).Interface()) == nil {
		return nil
	}
	var obj map[string]any
	if utiljson.Unmarshal(raw, &obj) != nil {
		return nil
	}
	return undecodableFields(obj, unmarshalsTo(h.typ))
}
