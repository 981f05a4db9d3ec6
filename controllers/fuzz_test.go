package controllers

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/engine"
	"github.com/cloudspace-dev/cloudspace-operator/internal/render"
)

// The fuzz targets of this file feed arbitrary specs to what the operator computes from them:
// each kind's values → render → decorate path (engine.Preview), and the VirtualMachine
// webhook. The CRD's schema refuses most such specs before the operator sees them, but the
// lifecycles promise to refuse by themselves what they cannot render (a VM made while the
// webhook was down, a CRD edited by hand), and a refusal must say which field to fix: it lands
// in the Degraded condition, read by someone who did not write the operator.

// fuzzNamespace is the namespace of every fuzzed resource.
const fuzzNamespace = "fuzz"

// fieldPath is how a refusal names the field at fault: a field.Path or a decode path
// ("spec.storage.size", "spec.ports[0].name", or ": spec: " for the spec as a whole), the
// ".spec" of an unstructured accessor, or where the chart's values.schema.json found it
// ("at '/storage/size'", a path in the values).
var fieldPath = regexp.MustCompile(`\bspec(\.\w+|\[\d+\])+|: spec: |(^|\s)\.spec\s|at '/[^']+'`)

// chartKind is a kind as the engine renders it.
type chartKind struct {
	kind      string
	chart     string // the chart's directory
	lifecycle engine.Lifecycle
	// children are the kinds the chart renders: no spec may add another (a value written into
	// a template unquoted can start a new object).
	children []string
	// golden is the directory of CRs (testdata/<chart>) whose names and specs seed the corpus.
	golden string
	// chartRefuses is set when the chart refuses values itself (fail, required): such a
	// refusal is the chart author's message, named by its template and line instead.
	chartRefuses bool
}

var (
	genericDaemonKind = chartKind{kind: "GenericDaemon", chart: "../helm-charts/genericdaemon",
		lifecycle: GenericDaemonLifecycle{}, children: []string{"DaemonSet", "ServiceAccount"}, golden: "testdata/genericdaemon"}
	workspaceKind = chartKind{kind: "Workspace", chart: "../helm-charts/workspace",
		lifecycle: WorkspaceLifecycle{WorkspaceConfig: goldenWorkspaceConfig},
		children:  []string{"Deployment", "Service", "PersistentVolumeClaim", "Secret", "NetworkPolicy", "Ingress"}, golden: "testdata/workspace"}
	virtualMachineKind = chartKind{kind: "VirtualMachine", chart: "../helm-charts/virtualmachine",
		lifecycle: VirtualMachineLifecycle{VMConfig: DefaultVMConfig()},
		children:  []string{"Pod", "Service", "PersistentVolumeClaim", "Secret", "VirtualMachine"}, golden: "testdata/virtualmachine"}
	demoKind = chartKind{kind: "Demo", chart: "../test/testdata/charts/demo", lifecycle: engine.ChartOnly{},
		children: []string{"ConfigMap", "Service"}, chartRefuses: true}
)

func FuzzGenericDaemonSpec(f *testing.F)  { fuzzChartKind(f, genericDaemonKind) }
func FuzzWorkspaceSpec(f *testing.F)      { fuzzChartKind(f, workspaceKind) }
func FuzzVirtualMachineSpec(f *testing.F) { fuzzChartKind(f, virtualMachineKind) }

// FuzzChartOnlySpec is a pure chart kind: the spec is the values as they are.
func FuzzChartOnlySpec(f *testing.F) {
	f.Add("demo", []byte(`{"greeting":"hi","extra":true,"port":8080}`))
	f.Add("demo", []byte(`{"fail":"the chart says no"}`))
	fuzzChartKind(f, demoKind)
}

// fuzzChartKind renders arbitrary specs of k: each is rendered into children of the chart's
// kinds in the resource's namespace, or refused naming the field at fault; nothing panics.
func fuzzChartKind(f *testing.F, k chartKind) {
	chart, err := render.Load(k.chart)
	if err != nil {
		f.Fatal(err)
	}
	for _, cr := range goldenCRs(f, k.golden) {
		f.Add(cr.GetName(), specJSON(f, cr))
	}
	f.Fuzz(func(t *testing.T, name string, spec []byte) {
		cr, ok := fuzzCR(k.kind, name, spec)
		if !ok {
			return
		}
		objs, err := engine.Preview(chart, k.lifecycle, cr, goldenCaps())
		if err != nil {
			checkRefusal(t, k, chart.Name(), err)
			return
		}
		checkChildren(t, k, objs)
	})
}

// fuzzCR is the resource with name and spec (JSON), or false when the API server would never
// store it (a name that is not a DNS subdomain, a spec that is not JSON) or the charts cannot
// render it yet (see unquotedInCharts).
func fuzzCR(kind, name string, spec []byte) (*unstructured.Unstructured, bool) {
	if len(validation.IsDNS1123Subdomain(name)) > 0 {
		return nil, false
	}
	var v any
	if err := utiljson.Unmarshal(spec, &v); err != nil {
		return nil, false
	}
	cr := &unstructured.Unstructured{Object: map[string]any{"spec": v}}
	cr.SetAPIVersion(infrav1alpha1.GroupVersion.String())
	cr.SetKind(kind)
	cr.SetName(name)
	cr.SetNamespace(fuzzNamespace)
	cr.SetUID("0f0e0d0c-0000-4000-8000-00000000f022")
	return cr, !unquotedInCharts(cr)
}

// unquotedInCharts reports whether cr has a name the charts cannot write yet. They write the
// release name ("name: {{ .Release.Name }}", and selector labels) and the VM's port names
// unquoted, so a resource named "0", "1e3" or "yes", or a port named "on" or "null", renders
// children whose name or labels are a number, a bool or null, which the API server refuses.
// Until the charts quote them, fuzzing leaves such names out; testdata/fuzz/*/
// release-name-read-as-number and port-name-read-as-bool are the cases.
func unquotedInCharts(cr *unstructured.Unstructured) bool {
	names := []string{cr.GetName()}
	ports, _, _ := unstructured.NestedSlice(cr.Object, "spec", "ports")
	for _, p := range ports {
		port, _ := p.(map[string]any) // nil, which has no name, for anything else
		if name, ok := port["name"].(string); ok {
			names = append(names, name)
		}
	}
	return slices.ContainsFunc(names, func(s string) bool { return !yamlString(s) })
}

// yamlString reports whether YAML reads s, written unquoted, as the string s.
func yamlString(s string) bool {
	var v map[string]any
	if err := yaml.Unmarshal([]byte("name: "+s), &v); err != nil {
		return false
	}
	return v["name"] == s
}

// templateAt is where a chart's own refusal comes from: "(<chart>/templates/<file>:<line>:<col>)".
var templateAt = regexp.MustCompile(`\([\w.-]+/templates/[^():]+:\d+:\d+\)`)

// checkRefusal checks that err is a render error (Preview's contract) naming the field at
// fault, or, for a chart that refuses values itself, its template.
func checkRefusal(t *testing.T, k chartKind, chartName string, err error) {
	t.Helper()
	var values *render.ValuesError
	var tmpl *render.TemplateError
	switch {
	case !errors.As(err, &values) && !errors.As(err, &tmpl):
		t.Fatalf("%s refused with %T, not a render error: %v", k.kind, err, err)
	case fieldPath.MatchString(err.Error()):
	case k.chartRefuses && tmpl != nil && templateAt.MatchString(err.Error()):
	default:
		t.Fatalf("%s refused without naming the field at fault: %v", k.kind, err)
	}
}

// checkChildren checks what a spec rendered: only the chart's kinds, named, in the resource's
// namespace (the engine cannot own children elsewhere), each of which decodes as its kind
// (the API server would refuse a field of the wrong type).
func checkChildren(t *testing.T, k chartKind, objs []*unstructured.Unstructured) {
	t.Helper()
	if len(objs) == 0 {
		t.Fatalf("%s rendered nothing and refused nothing", k.kind)
	}
	for _, o := range objs {
		if !slices.Contains(k.children, o.GetKind()) || o.GetName() == "" || o.GetNamespace() != fuzzNamespace {
			t.Fatalf("%s rendered %s %s/%s: want one of %v, named, in %s", k.kind, o.GetKind(), o.GetNamespace(), o.GetName(), k.children, fuzzNamespace)
		}
		if err := decodesAsKind(o); err != nil {
			t.Fatalf("%s rendered a %s that is not one: %v", k.kind, o.GetKind(), err)
		}
	}
}

// decodesAsKind decodes o into its typed kind, or only its metadata for a kind client-go does
// not know (KubeVirt's).
func decodesAsKind(o *unstructured.Unstructured) error {
	typed, err := clientgoscheme.Scheme.New(o.GroupVersionKind())
	if err != nil {
		meta, _ := o.Object["metadata"].(map[string]any)
		return runtime.DefaultUnstructuredConverter.FromUnstructured(meta, &metav1.ObjectMeta{})
	}
	return runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, typed)
}

// goldenCRs are the golden test's inputs under dir, none when dir is empty.
func goldenCRs(f *testing.F, dir string) []*unstructured.Unstructured {
	if dir == "" {
		return nil
	}
	paths, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(paths) == 0 {
		f.Fatalf("no CRs under %s to seed the corpus (%v)", dir, err)
	}
	var out []*unstructured.Unstructured
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		cr := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(data, &cr.Object); err != nil {
			f.Fatalf("%s: %v", p, err)
		}
		out = append(out, cr)
	}
	return out
}

func specJSON(f *testing.F, cr *unstructured.Unstructured) []byte {
	data, err := json.Marshal(cr.Object["spec"])
	if err != nil {
		f.Fatal(err)
	}
	return data
}

// FuzzVirtualMachineWebhook admits arbitrary VMs through the webhook as the API server asks
// it: the mutating webhook's Default, then the validating webhook's create or update (old is
// the stored VM, as decoded). Nothing panics; Default fills every field it owns and is
// idempotent; a refusal is Invalid with every cause under spec; an update that changes
// nothing is admitted whenever the create was (limits apply to changes only).
func FuzzVirtualMachineWebhook(f *testing.F) {
	for _, cr := range goldenCRs(f, virtualMachineKind.golden) {
		spec := specJSON(f, cr)
		f.Add([]byte("{}"), spec, false, false)
		f.Add(spec, spec, true, true)
	}
	scheme := runtime.NewScheme()
	if err := infrav1alpha1.AddToScheme(scheme); err != nil {
		f.Fatal(err)
	}
	decoder := admission.NewDecoder(scheme)
	f.Fuzz(func(t *testing.T, oldSpec, newSpec []byte, update, kubeVirt bool) {
		vm, okNew := decodeVMRequest(decoder, newSpec)
		old, okOld := decodeVMRequest(decoder, oldSpec)
		if !okNew || update && !okOld {
			return // the webhook's decoder refuses it before our code runs
		}
		wh := VirtualMachineWebhook{VMConfig: DefaultVMConfig(),
			KubeVirtServed: func(context.Context) (bool, error) { return kubeVirt, nil }}
		ctx := context.Background()
		checkDefault(t, wh, vm)
		var err error
		if update {
			_, err = wh.ValidateUpdate(ctx, old, vm)
		} else {
			_, err = wh.ValidateCreate(ctx, vm)
		}
		checkAdmission(t, err)
		if !update && err == nil {
			if _, err := wh.ValidateUpdate(ctx, vm.DeepCopy(), vm); err != nil {
				t.Fatalf("an admitted VM, updated to itself, is refused: %v", err)
			}
		}
	})
}

// decodeVMRequest decodes a VirtualMachine with spec as the webhook's decoder does.
func decodeVMRequest(d admission.Decoder, spec []byte) (*infrav1alpha1.VirtualMachine, bool) {
	raw, err := json.Marshal(map[string]any{"apiVersion": infrav1alpha1.GroupVersion.String(), "kind": "VirtualMachine",
		"metadata": map[string]any{"name": "vm", "namespace": fuzzNamespace}, "spec": json.RawMessage(spec)})
	if err != nil {
		return nil, false
	}
	vm := &infrav1alpha1.VirtualMachine{}
	if err := d.DecodeRaw(runtime.RawExtension{Raw: raw}, vm); err != nil {
		return nil, false
	}
	return vm, true
}

// checkDefault runs the mutating webhook on vm: every field it defaults is set after it, and a
// second run changes nothing.
func checkDefault(t *testing.T, wh VirtualMachineWebhook, vm *infrav1alpha1.VirtualMachine) {
	t.Helper()
	if err := wh.Default(context.Background(), vm); err != nil {
		t.Fatalf("Default: %v", err)
	}
	s := vm.Spec
	if s.CPU == nil || s.Memory == nil || s.Image == "" || s.RunStrategy == "" || s.Backend == "" ||
		s.Disk.Size == nil || s.Disk.ReclaimPolicy == "" || len(s.Ports) == 0 || s.ShutdownGracePeriod == nil {
		t.Fatalf("Default left a field unset: %+v", s)
	}
	again := vm.DeepCopy()
	if err := wh.Default(context.Background(), again); err != nil || !equality.Semantic.DeepEqual(again, vm) {
		t.Fatalf("Default is not idempotent: %+v, then %+v (%v)", vm.Spec, again.Spec, err)
	}
}

// spec path of an admission cause: "spec.cpu", "spec.ports[0].name".
var causeField = regexp.MustCompile(`^spec(\.\w+|\[\d+\])+$`)

// checkAdmission checks a validating webhook's answer: admitted, or Invalid with each cause
// (a field.ErrorList entry) at a field of the spec.
func checkAdmission(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	var st apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &st) || st.Status().Details == nil || len(st.Status().Details.Causes) == 0 {
		t.Fatalf("refused without a field error: %v", err)
	}
	for _, c := range st.Status().Details.Causes {
		if !causeField.MatchString(c.Field) || c.Message == "" {
			t.Fatalf("refusal cause %+v is not a message at a spec field (%v)", c, err)
		}
	}
}
