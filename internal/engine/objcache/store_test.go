package objcache

import (
	"encoding/json"
	"os"
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
	c := Store{Scheme: clientgoscheme.Scheme}
	cases := []struct {
		gvk       schema.GroupVersionKind
		object    client.Object
		list      client.ObjectList
		unknownOK bool
	}{
		{corev1.SchemeGroupVersion.WithKind("ConfigMap"), &corev1.ConfigMap{}, &corev1.ConfigMapList{}, false},
		{appsv1.SchemeGroupVersion.WithKind("Deployment"), &appsv1.Deployment{}, &appsv1.DeploymentList{}, false},
		{corev1.SchemeGroupVersion.WithKind("Pod"), &corev1.Pod{}, &corev1.PodList{}, false},
		{schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}, nil, nil, true},
	}
	if _, ok := (Store{}).Object(corev1.SchemeGroupVersion.WithKind("ConfigMap")).(*unstructured.Unstructured); !ok {
		t.Error("a store without a scheme (the custom resources') caches a known kind typed")
	}
	for _, tc := range cases {
		t.Run(tc.gvk.Kind, func(t *testing.T) {
			obj, list := c.Object(tc.gvk), c.list(tc.gvk)
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
// decodes to, so the engine compares it with its render as it would the API server's copy.
func TestTypedObjectIsWhatTheAPIServersJSONIs(t *testing.T) {
	data, err := os.ReadFile("../testdata/deployment-live.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var typed appsv1.Deployment
	if err := yaml.UnmarshalStrict(data, &typed); err != nil {
		t.Fatal(err)
	}
	// As the informer caches it: without its type.
	typed.TypeMeta = metav1.TypeMeta{}
	gvk := appsv1.SchemeGroupVersion.WithKind("Deployment")
	live, err := asUnstructured(typed.DeepCopy(), gvk)
	if err != nil {
		t.Fatal(err)
	}
	typed.TypeMeta = metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}
	data, err = json.Marshal(&typed)
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
}
