// What csvdesc writes describes the operator's kinds to OLM: the owned-CRD entries of the
// ClusterServiceVersion, with a spec or status descriptor for every field, which OperatorHub and
// the console turn into forms and detail pages. operator-sdk reads descriptors from Go markers
// only in Go projects, never in a hybrid one like this; here they come from the Go types (which
// fields there are and which widget fits each) and the CRD (what each field means: the types'
// doc comments), so that nothing is written twice.

package main

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"unicode"

	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// The console's x-descriptors this package uses (openshift/console's OLM descriptor reference).
const (
	uiPrefix             = "urn:alm:descriptor:com.tectonic.ui:"
	xText                = uiPrefix + "text"
	xNumber              = uiPrefix + "number"
	xBoolean             = uiPrefix + "booleanSwitch"
	xAdvanced            = uiPrefix + "advanced"
	xResources           = uiPrefix + "resourceRequirements"
	xUpdateStrategy      = uiPrefix + "updateStrategy"
	xResourcePrefix      = "urn:alm:descriptor:io.kubernetes:"
	xStatusText          = "urn:alm:descriptor:text"
	xStatusLink          = "urn:alm:descriptor:org.w3:link"
	xStatusConditions    = "urn:alm:descriptor:io.kubernetes.conditions"
	xStatusPhase         = "urn:alm:descriptor:io.kubernetes.phase"
	xStatusPhaseReason   = "urn:alm:descriptor:io.kubernetes.phase:reason"
	apiPackage           = "github.com/cloudspace-dev/cloudspace-operator/api/"
	fieldGroupDescriptor = uiPrefix + "fieldGroup:"
	arrayGroupDescriptor = uiPrefix + "arrayFieldGroup:"
)

// foreignWidgets are the Kubernetes types the console has a widget for; any other type that is
// not ours and not a scalar is edited as YAML, under "Advanced".
var foreignWidgets = map[reflect.Type]string{
	reflect.TypeOf(corev1.ResourceRequirements{}):    xResources,
	reflect.TypeOf(appsv1.DaemonSetUpdateStrategy{}): xUpdateStrategy,
}

// statusWidgets name the status fields the console shows in a particular way, by JSON name.
var statusWidgets = map[string]string{
	"conditions": xStatusConditions,
	"phase":      xStatusPhase,
	"message":    xStatusPhaseReason,
	// Why the operator stopped a workspace: it explains the phase Stopped.
	"stoppedReason": xStatusPhaseReason,
	"url":           xStatusLink,
	"nodeName":      xResourcePrefix + "Node",
}

// resourceNameSuffixes turn a spec field that names an object into a link to that kind.
var resourceNameSuffixes = []struct{ suffix, kind string }{
	{"SecretName", "Secret"},
	{"storageClassName", "StorageClass"},
	{"StorageClassName", "StorageClass"},
}

// Describe returns the owned-CRD entry of crd, whose Go type is that of obj (a pointer to the
// kind's struct): its description, and a spec descriptor for every spec field (nested fields of
// our own types too, grouped under their parent) and a status descriptor for every status field.
func Describe(crd *apiextv1.CustomResourceDefinition, obj any) (operatorsv1alpha1.CRDDescription, error) {
	version, err := storageVersion(crd)
	if err != nil {
		return operatorsv1alpha1.CRDDescription{}, err
	}
	root := version.Schema.OpenAPIV3Schema
	t := deref(reflect.TypeOf(obj))
	d := operatorsv1alpha1.CRDDescription{
		Name:        crd.Name,
		Version:     version.Name,
		Kind:        crd.Spec.Names.Kind,
		DisplayName: DisplayName(crd.Spec.Names.Kind),
		Description: oneLine(root.Description),
	}
	specType, specSchema, err := member(t, root, "spec")
	if err != nil {
		return d, err
	}
	if d.SpecDescriptors, err = specDescriptors(specType, specSchema, "", ""); err != nil {
		return d, fmt.Errorf("%s spec: %w", d.Kind, err)
	}
	statusType, statusSchema, err := member(t, root, "status")
	if err != nil {
		return d, err
	}
	if d.StatusDescriptors, err = statusDescriptors(statusType, statusSchema); err != nil {
		return d, fmt.Errorf("%s status: %w", d.Kind, err)
	}
	return d, nil
}

func storageVersion(crd *apiextv1.CustomResourceDefinition) (*apiextv1.CustomResourceDefinitionVersion, error) {
	for i, v := range crd.Spec.Versions {
		if v.Storage && v.Schema != nil && v.Schema.OpenAPIV3Schema != nil {
			return &crd.Spec.Versions[i], nil
		}
	}
	return nil, fmt.Errorf("CRD %s has no storage version with a schema", crd.Name)
}

// member is the Go type and the schema of the struct field of t whose JSON name is name.
func member(t reflect.Type, schema *apiextv1.JSONSchemaProps, name string) (reflect.Type, *apiextv1.JSONSchemaProps, error) {
	for _, f := range jsonFields(t) {
		if f.name == name {
			s, ok := schema.Properties[name]
			if !ok {
				return nil, nil, fmt.Errorf("the CRD's schema has no %q", name)
			}
			return f.typ, &s, nil
		}
	}
	return nil, nil, fmt.Errorf("%s has no field %q", t, name)
}

// specDescriptors describes every field of the struct t under prefix; group is the x-descriptor
// that places them under their parent in the console's form.
func specDescriptors(t reflect.Type, schema *apiextv1.JSONSchemaProps, prefix, group string) ([]operatorsv1alpha1.SpecDescriptor, error) {
	var out []operatorsv1alpha1.SpecDescriptor
	for _, f := range jsonFields(t) {
		s, ok := schema.Properties[f.name]
		if !ok {
			return nil, fmt.Errorf("the CRD's schema has no %s%s", prefix, f.name)
		}
		path := prefix + f.name
		d := operatorsv1alpha1.SpecDescriptor{
			Path: path, DisplayName: DisplayName(f.name), Description: oneLine(s.Description),
			XDescriptors: specWidgets(f, &s),
		}
		if group != "" {
			d.XDescriptors = append(d.XDescriptors, group)
		}
		out = append(out, d)
		children, err := nestedSpecDescriptors(f, &s, path)
		if err != nil {
			return nil, err
		}
		out = append(out, children...)
	}
	return out, nil
}

// nestedSpecDescriptors describes the fields inside a field of one of our own struct types, or
// inside the items of a list of them.
func nestedSpecDescriptors(f field, s *apiextv1.JSONSchemaProps, path string) ([]operatorsv1alpha1.SpecDescriptor, error) {
	switch {
	case isOurStruct(f.typ):
		return specDescriptors(f.typ, s, path+".", fieldGroupDescriptor+path)
	case f.typ.Kind() == reflect.Slice && isOurStruct(deref(f.typ.Elem())):
		if s.Items == nil || s.Items.Schema == nil {
			return nil, fmt.Errorf("the CRD's schema has no items for %s", path)
		}
		return specDescriptors(deref(f.typ.Elem()), s.Items.Schema, path+"[0].", arrayGroupDescriptor+path)
	}
	return nil, nil
}

// specWidgets is the console widget of a spec field: one the Kubernetes type has, a choice for
// an enum, a link for a field that names an object, a switch, a number or text for scalars; a
// struct of ours has none (its fields have theirs), and anything else is YAML under Advanced.
func specWidgets(f field, s *apiextv1.JSONSchemaProps) []string {
	if w := foreignWidgets[f.typ]; w != "" {
		return []string{w}
	}
	if len(s.Enum) > 0 {
		var out []string
		for _, v := range s.Enum {
			out = append(out, uiPrefix+"select:"+strings.Trim(string(v.Raw), `"`))
		}
		return out
	}
	for _, r := range resourceNameSuffixes {
		if strings.HasSuffix(f.name, r.suffix) {
			return []string{xResourcePrefix + r.kind}
		}
	}
	switch {
	case isOurStruct(f.typ):
		return nil
	case s.Type == "boolean":
		return []string{xBoolean}
	case s.Type == "integer":
		return []string{xNumber}
	case s.Type == "string" || s.XIntOrString:
		return []string{xText}
	}
	return []string{xAdvanced}
}

// statusDescriptors describes every top-level status field: the console shows a status field as
// a whole, so nested fields get no descriptors of their own.
func statusDescriptors(t reflect.Type, schema *apiextv1.JSONSchemaProps) ([]operatorsv1alpha1.StatusDescriptor, error) {
	var out []operatorsv1alpha1.StatusDescriptor
	for _, f := range jsonFields(t) {
		s, ok := schema.Properties[f.name]
		if !ok {
			return nil, fmt.Errorf("the CRD's schema has no %s", f.name)
		}
		d := operatorsv1alpha1.StatusDescriptor{
			Path: f.name, DisplayName: DisplayName(f.name), Description: oneLine(s.Description),
		}
		switch w, named := statusWidgets[f.name]; {
		case named:
			d.XDescriptors = []string{w}
		case s.Type == "string" || s.Type == "integer":
			d.XDescriptors = []string{xStatusText}
		}
		out = append(out, d)
	}
	return out, nil
}

// field is a struct field with its JSON name and its type, pointers removed.
type field struct {
	name string
	typ  reflect.Type
}

// jsonFields lists t's fields by JSON name, in declaration order, with embedded structs'
// fields in place (as encoding/json sees them).
func jsonFields(t reflect.Type) []field {
	var out []field
	for i := range t.NumField() {
		sf := t.Field(i)
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		switch {
		case name == "-" || !sf.IsExported():
		case sf.Anonymous && name == "":
			out = append(out, jsonFields(deref(sf.Type))...)
		case name != "":
			out = append(out, field{name: name, typ: deref(sf.Type)})
		}
	}
	return out
}

func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// isOurStruct reports whether t is a struct of this project's API, whose fields are described
// one by one.
func isOurStruct(t reflect.Type) bool {
	return t.Kind() == reflect.Struct && strings.HasPrefix(t.PkgPath(), apiPackage)
}

// acronyms are written in capitals in display names.
var acronyms = map[string]string{"cpu": "CPU", "ip": "IP", "url": "URL", "tls": "TLS", "ssh": "SSH", "id": "ID"}

// DisplayName turns a JSON field name or a kind into words: "storageClassName" is "Storage
// Class Name", "podIP" is "Pod IP", "GenericDaemon" is "Generic Daemon".
func DisplayName(name string) string {
	var words []string
	runes := []rune(name)
	start := 0
	for i := 1; i <= len(runes); i++ {
		if i == len(runes) || wordStarts(runes, i) {
			words = append(words, string(runes[start:i]))
			start = i
		}
	}
	for i, w := range words {
		if a, ok := acronyms[strings.ToLower(w)]; ok {
			words[i] = a
			continue
		}
		r := []rune(w)
		r[0] = unicode.ToUpper(r[0])
		words[i] = string(r)
	}
	return strings.Join(words, " ")
}

// wordStarts reports whether a new word starts at runes[i]: a capital after a small letter, or
// the last capital of a run of capitals followed by a small letter ("TLSSecret": "TLS Secret").
func wordStarts(runes []rune, i int) bool {
	cur, prev := runes[i], runes[i-1]
	if !unicode.IsUpper(cur) {
		return false
	}
	if !unicode.IsUpper(prev) {
		return true
	}
	return i+1 < len(runes) && unicode.IsLower(runes[i+1])
}

// oneLine joins a doc comment's lines, as the console shows a description as one paragraph.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// Merge replaces in owned the entry of d's kind by d, keeping what the CSV base says by hand:
// the display name and the resources; a kind not there yet is added. Entries stay sorted by
// kind, so that the result does not depend on the order kinds were described in.
func Merge(owned []operatorsv1alpha1.CRDDescription, d operatorsv1alpha1.CRDDescription) []operatorsv1alpha1.CRDDescription {
	i := slices.IndexFunc(owned, func(o operatorsv1alpha1.CRDDescription) bool { return o.Name == d.Name })
	if i < 0 {
		owned = append(owned, d)
	} else {
		if owned[i].DisplayName != "" {
			d.DisplayName = owned[i].DisplayName
		}
		d.Resources = owned[i].Resources
		d.ActionDescriptor = owned[i].ActionDescriptor
		owned[i] = d
	}
	slices.SortFunc(owned, func(a, b operatorsv1alpha1.CRDDescription) int { return strings.Compare(a.Kind, b.Kind) })
	return owned
}
