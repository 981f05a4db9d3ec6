package engine

import (
	"os"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	"github.com/cloudspace-dev/cloudspace-operator/internal/engine/objcache"
)

// TestWavesKeepPrerequisitesFirst: what a pod needs at admission is written before the rest,
// and the rest is one wave, in install order.
func TestWavesKeepPrerequisitesFirst(t *testing.T) {
	stepsOf := func(kinds ...string) []step {
		var out []step
		for _, k := range kinds {
			u := &unstructured.Unstructured{}
			u.SetKind(k)
			out = append(out, step{desired: u})
		}
		return out
	}
	kindsOf := func(ws [][]step) [][]string {
		var out [][]string
		for _, w := range ws {
			var ks []string
			for _, st := range w {
				ks = append(ks, st.desired.GetKind())
			}
			out = append(out, ks)
		}
		return out
	}
	for _, tc := range []struct {
		in   []string
		want [][]string
	}{
		{[]string{"NetworkPolicy", "Secret", "PersistentVolumeClaim", "Service", "Deployment"},
			[][]string{{"NetworkPolicy", "Secret", "PersistentVolumeClaim", "Service", "Deployment"}}},
		{[]string{"ServiceAccount", "DaemonSet"}, [][]string{{"ServiceAccount"}, {"DaemonSet"}}},
		{[]string{"ServiceAccount", "Secret", "Role", "RoleBinding", "Pod"},
			[][]string{{"ServiceAccount", "Role", "RoleBinding"}, {"Secret", "Pod"}}},
		{nil, nil},
	} {
		if got := kindsOf(waves(stepsOf(tc.in...))); !slices.EqualFunc(got, tc.want, slices.Equal) {
			t.Errorf("waves(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// A child cached typed and handed out converted (objcache.Store, whose tests pin that to the
// API server's JSON) compares with its render: unchanged is up to date, a field changed by hand
// is drift.
func TestTypedChildComparesWithItsRender(t *testing.T) {
	desired := readYAML(t, "testdata/deployment-rendered.yaml")
	var typed appsv1.Deployment
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(readYAML(t, "testdata/deployment-live.yaml").Object, &typed); err != nil {
		t.Fatal(err)
	}
	if !upToDate(desired, nil, cachedTyped(t, typed.DeepCopy())) {
		t.Error("the unchanged child is not up to date")
	}
	typed.Spec.Template.Spec.Containers[0].Image = "ide:2"
	if upToDate(desired, nil, cachedTyped(t, &typed)) {
		t.Error("an image changed by hand is not seen as drift")
	}
}

// A rendered value that a built-in kind's Go type omits when empty (readOnly: false) is not in
// the API server's copy of the child, nor in the typed cache's, and neither is a field newer
// than our Go types (futureField): such a child is up to date, or it would be applied again at
// every reconcile. Values the type keeps (a false *bool) and edits by hand are still drift.
func TestRenderedEmptyValuesTheAPIServerDropsAreNotDrift(t *testing.T) {
	const rendered = `
apiVersion: apps/v1
kind: Deployment
metadata: {name: ide, namespace: a, annotations: {infra.cloudspace.dev/spec-hash: abc}}
spec:
  selector: {matchLabels: {app: ide}}
  template:
    metadata: {labels: {app: ide}}
    spec:
      hostNetwork: false
      futureField: {enabled: true}
      automountServiceAccountToken: false
      containers:
      - {name: ide, image: "ide:1", volumeMounts: [{name: home, mountPath: /home, readOnly: false}]}
`
	desired := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(rendered), &desired.Object); err != nil {
		t.Fatal(err)
	}
	r := &reconciler{children: objcache.Store{Scheme: clientgoscheme.Scheme}}
	cases := []struct {
		name string
		edit func(*appsv1.Deployment)
		ok   bool
	}{
		{"as stored by the API server", func(*appsv1.Deployment) {}, true},
		{"a false *bool removed by hand", func(d *appsv1.Deployment) { d.Spec.Template.Spec.AutomountServiceAccountToken = nil }, false},
		{"readOnly set by hand", func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].VolumeMounts[0].ReadOnly = true }, false},
		{"image changed by hand", func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "ide:2" }, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var typed appsv1.Deployment
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(desired.Object, &typed); err != nil {
				t.Fatal(err)
			}
			typed.ResourceVersion = "7"
			tc.edit(&typed)
			if got := r.unchanged(step{desired: desired, current: cachedTyped(t, &typed)}); got != tc.ok {
				t.Errorf("up to date = %v, want %v", got, tc.ok)
			}
		})
	}
}

// cachedTyped is a Deployment as a store that caches it typed hands it out: converted to
// unstructured, with its kind.
func cachedTyped(t *testing.T, d *appsv1.Deployment) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(d)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("Deployment"))
	return u
}

// readYAML reads one object from a file under testdata/.
func readYAML(t *testing.T, path string) *unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}
