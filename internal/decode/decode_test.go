package decode

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	utiljson "k8s.io/apimachinery/pkg/util/json"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
)

func TestFromUnstructuredNamesTheField(t *testing.T) {
	for _, tc := range []struct {
		spec string
		path string // "" when the spec decodes
	}{
		{`{"image":"busybox","resources":{"limits":{"cpu":"2"}}}`, ""},
		{`7`, "spec: "},
		{`{"image":5}`, "spec.image: "},
		{`{"tolerations":"all"}`, "spec.tolerations: "},
		{`{"resources":{"limits":{"cpu":"lots"}}}`, "spec.resources.limits.cpu: "},
		{`{"env":[{"name":"A"},{"name":"B","value":7}]}`, "spec.env[1].value: "},
		{`{"nodeSelector":{"disk":"ssd","a.b/c":3}}`, "spec.nodeSelector[a.b/c]: "},
	} {
		var spec any
		if err := utiljson.Unmarshal([]byte(tc.spec), &spec); err != nil {
			t.Fatal(err)
		}
		err := FromUnstructured(map[string]any{"spec": spec}, &infrav1alpha1.GenericDaemon{})
		switch {
		case tc.path == "" && err != nil:
			t.Errorf("%s: %v, want decoded", tc.spec, err)
		case tc.path != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.path)):
			t.Errorf("%s: %v, want an error starting %q", tc.spec, err, tc.path)
		}
	}
}

// TestUndecodableFields: each value its Go type cannot hold is named by path, with the
// decoder's reason for it, as field.Invalid reports it; under both decoders (the lifecycles'
// converter, the webhooks' JSON) and for both kinds whose specs hold quantities and durations.
func TestUndecodableFields(t *testing.T) {
	vm := reflect.TypeFor[infrav1alpha1.VirtualMachine]()
	ws := reflect.TypeFor[infrav1alpha1.Workspace]()
	const quantity = "quantities must match the regular expression"
	for _, tc := range []struct {
		name string
		typ  reflect.Type
		spec string
		want []string // the errors, each starting so; none when the spec decodes
	}{
		{"vm decodes", vm, `{"cpu":"2","memory":"2G","disk":{"size":"10Gi"},"shutdownGracePeriod":"90s"}`, nil},
		{"vm memory", vm, `{"memory":"abc"}`, []string{`spec.memory: Invalid value: "abc": ` + quantity}},
		{"vm memory a list", vm, `{"memory":["1Gi"]}`, []string{`spec.memory: Invalid value: "array": `}},
		{"vm cpu a fraction", vm, `{"cpu":1.5}`, []string{`spec.cpu: Invalid value: 1.5: `}},
		{"vm cpu an object", vm, `{"cpu":{"n":1}}`, []string{`spec.cpu: Invalid value: "object": `}},
		{"vm disk size", vm, `{"disk":{"size":"big","reclaimPolicy":"Retain"}}`, []string{`spec.disk.size: Invalid value: "big": ` + quantity}},
		{"vm grace period", vm, `{"shutdownGracePeriod":"soon"}`, []string{`spec.shutdownGracePeriod: Invalid value: "soon": time: invalid duration`}},
		{"vm port a string", vm, `{"ports":[{"name":"ssh","port":22},{"name":"web","port":"80"}]}`, []string{`spec.ports[1].port: Invalid value: "80": `}},
		{"vm three at once", vm, `{"memory":"abc","cpu":1.5,"disk":{"size":"big"}}`, []string{
			`spec.cpu: Invalid value: 1.5: `,
			`spec.disk.size: Invalid value: "big": ` + quantity,
			`spec.memory: Invalid value: "abc": ` + quantity,
		}},
		{"workspace decodes", ws, `{"owner":"a","resources":{"cpu":"1","memory":"2Gi"},"storage":{"size":"1Gi"},"startTimeout":"5m"}`, nil},
		{"workspace quantities", ws, `{"resources":{"cpu":"lots","memory":"2Gi"},"storage":{"size":"1e1.5"}}`, []string{
			`spec.resources.cpu: Invalid value: "lots": ` + quantity,
			`spec.storage.size: Invalid value: "1e1.5": ` + quantity,
		}},
		{"workspace start timeout", ws, `{"startTimeout":"soon"}`, []string{`spec.startTimeout: Invalid value: "soon": time: invalid duration`}},
		{"workspace env divisor", ws, `{"env":[{"name":"A","value":"x"},{"name":"B","valueFrom":{"resourceFieldRef":{"resource":"limits.cpu","divisor":"x"}}}]}`,
			[]string{`spec.env[1].valueFrom.resourceFieldRef.divisor: Invalid value: "x": ` + quantity}},
		{"workspace git a string", ws, `{"git":"https://example.com/r.git"}`, []string{`spec.git: Invalid value: "https://example.com/r.git": `}},
	} {
		var spec map[string]any
		if err := utiljson.Unmarshal([]byte(tc.spec), &spec); err != nil {
			t.Fatal(err)
		}
		obj := map[string]any{"apiVersion": "infra.cloudspace.dev/v1alpha1", "metadata": map[string]any{"name": "x"}, "spec": spec}
		for name, decode := range map[string]decoder{"converter": convertsTo(tc.typ), "json": unmarshalsTo(tc.typ)} {
			errs := undecodableFields(obj, decode)
			if len(errs) != len(tc.want) {
				t.Errorf("%s (%s): %v, want %d errors %q", tc.name, name, errs, len(tc.want), tc.want)
				continue
			}
			for i, err := range errs {
				if !strings.HasPrefix(err.Error(), tc.want[i]) {
					t.Errorf("%s (%s): error %d is %q, want it to start %q", tc.name, name, i, err, tc.want[i])
				}
			}
		}
	}
}

// TestFromUnstructuredNamesFieldsAsOtherRefusals: fromUnstructured's error is field.Invalid's
// ("spec.memory: Invalid value: ..."), and nothing is blamed when nothing can be: the caller
// then returns the decoder's own error.
func TestFromUnstructuredNamesFieldsAsOtherRefusals(t *testing.T) {
	if err := FromUnstructured(map[string]any{"spec": map[string]any{"memory": "abc"}}, &infrav1alpha1.VirtualMachine{}); err == nil ||
		!strings.HasPrefix(err.Error(), `spec.memory: Invalid value: "abc": quantities must match`) {
		t.Errorf("got %v, want spec.memory named", err)
	}
	never := func(map[string]any) error { return errors.New("never") }
	if errs := undecodableFields(map[string]any{}, never); len(errs) != 0 {
		t.Errorf("an empty object: %v, want nothing blamed", errs)
	}
	if errs := undecodableFields(map[string]any{"spec": map[string]any{}}, never); len(errs) != 1 || errs[0].Field != "spec" {
		t.Errorf("a decoder that refuses every object: %v, want spec blamed", errs)
	}
}
