package engine

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

func TestStoreCachesKnownKindsTyped(t *testing.T) {
	c := store{scheme: clientgoscheme.Scheme}
	cases := []struct {
		gvk       schema.GroupVersionKind
		object    client.Object
		list      client.ObjectList
		unknownOK bool
	}{
		{corev1.SchemeGroupVersion.WithKind("ConfigMap"), &corev1.ConfigMap{}, &corev1.ConfigMapList{}, false},
		{appsv1.SchemeGroupVersion.WithKind("Deployment"), &appsv1.Deployment{}, &appsv1.DeploymentList{}, false},
		{podGVK, &corev1.Pod{}, &corev1.PodList{}, false},
		{schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}, nil, nil, true},
	}
	if _, ok := (store{}).object(corev1.SchemeGroupVersion.WithKind("ConfigMap")).(*unstructured.Unstructured); !ok {
		t.Error("a store without a scheme (the custom resources') caches a known kind typed")
	}
	for _, tc := range cases {
		t.Run(tc.gvk.Kind, func(t *testing.T) {
			obj, list := c.object(tc.gvk), c.list(tc.gvk)
			if tc.unknownOK {
				u, ok := obj.(*unstructured.Unstructured)
				ul, lok := list.(*unstructured.UnstructuredList)
				if !ok || !lok || u.GroupVersionKind() != tc.gvk || ul.GroupVersionKind().Kind != "WidgetList" {
					t.Fatalf("an unknown kind is cached as %T / %T, want unstructured with its kind", obj, list)
				}
				return
			}
			if got, want := kindOf(obj), kindOf(tc.object); got != want {
				t.Errorf("object: %s, want %s", got, want)
			}
			if got, want := kindOf(list), kindOf(tc.list); got != want {
				t.Errorf("list: %s, want %s", got, want)
			}
		})
	}
}

func kindOf(o runtime.Object) string {
	switch o.(type) {
	case *unstructured.Unstructured, *unstructured.UnstructuredList:
		return "unstructured"
	}
	kinds, _, err := clientgoscheme.Scheme.ObjectKinds(o)
	if err != nil || len(kinds) == 0 {
		return "unknown"
	}
	return kinds[0].Kind
}

// A child cached typed and handed out converted is the object the API server's JSON for it
// decodes to, so it compares with its render the same way: unchanged is up to date, a field
// changed by hand is drift.
func TestTypedObjectIsWhatTheAPIServersJSONIs(t *testing.T) {
	const rendered = `
apiVersion: apps/v1
kind: Deployment
metadata: {name: ide, namespace: a, labels: {app.kubernetes.io/instance: ide}, annotations: {infra.cloudspace.dev/spec-hash: abc}}
spec:
  replicas: 0
  selector: {matchLabels: {app: ide}}
  template:
    metadata: {labels: {app: ide}}
    spec:
      automountServiceAccountToken: false
      containers:
      - name: ide
        image: ide:1
        ports: [{containerPort: 8080}]
        resources: {limits: {cpu: "0.5", memory: 1Gi}}
        volumeMounts: [{name: home, mountPath: /home}]
`
	desired := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(rendered), &desired.Object); err != nil {
		t.Fatal(err)
	}
	var typed appsv1.Deployment
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(desired.Object, &typed); err != nil {
		t.Fatal(err)
	}
	// What the API server adds: defaults, its own fields and a status.
	typed.UID, typed.ResourceVersion, typed.Generation = "u1", "7", 1
	typed.CreationTimestamp = metav1.Now().Rfc3339Copy()
	typed.Spec.Template.Spec.Containers[0].Ports[0].Protocol = corev1.ProtocolTCP
	typed.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyAlways
	typed.Status.ObservedGeneration = 1

	gvk := appsv1.SchemeGroupVersion.WithKind("Deployment")
	live, err := asUnstructured(typed.DeepCopy(), gvk)
	if err != nil {
		t.Fatal(err)
	}
	typed.TypeMeta = metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}
	data, err := json.Marshal(&typed)
	if err != nil {
		t.Fatal(err)
	}
	fromAPI := &unstructured.Unstructured{}
	if err := fromAPI.UnmarshalJSON(data); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(fromAPI.Object, live.Object); diff != "" {
		t.Fatalf("converted child differs from the API server's JSON (-json +converted):\n%s", diff)
	}
	if !upToDate(desired, nil, live) {
		t.Error("the unchanged child is not up to date")
	}
	typed.Spec.Template.Spec.Containers[0].Image = "ide:2"
	edited, err := asUnstructured(&typed, gvk)
	if err != nil {
		t.Fatal(err)
	}
	if upToDate(desired, nil, edited) {
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
	r := &reconciler{children: store{scheme: clientgoscheme.Scheme}}
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
			live, err := asUnstructured(&typed, appsv1.SchemeGroupVersion.WithKind("Deployment"))
			if err != nil {
				t.Fatal(err)
			}
			if got := r.unchanged(step{desired: desired, current: live}); got != tc.ok {
				t.Errorf("up to date = %v, want %v", got, tc.ok)
			}
		})
	}
}
