package engine

import (
	"fmt"
	"runtime"
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// demoJSON is a served resource as the API server sends it once reconciled.
func demoJSON(i int) []byte {
	return fmt.Appendf(nil, `{"apiVersion":"demo.cloudspace.dev/v1alpha1","kind":"Demo","metadata":{
		"name":"demo-%05d","namespace":"bench-scale","uid":"8a3c1f0e-2b4d-4e6f-9a1b-%012d",
		"resourceVersion":"%d","generation":1,"creationTimestamp":"2026-11-25T01:00:00Z",
		"finalizers":["infra.cloudspace.dev/finalizer"]},
		"spec":{"greeting":"hello","port":8080},
		"status":{"observedGeneration":1,"conditions":[
		{"type":"Ready","status":"True","reason":"Reconciled","message":"2 children are ready","lastTransitionTime":"2026-11-25T01:00:01Z","observedGeneration":1},
		{"type":"Progressing","status":"False","reason":"Reconciled","message":"2 children are ready","lastTransitionTime":"2026-11-25T01:00:01Z","observedGeneration":1},
		{"type":"Degraded","status":"False","reason":"Reconciled","message":"2 children are ready","lastTransitionTime":"2026-11-25T01:00:01Z","observedGeneration":1}],
		"inventory":{"entries":[{"id":"bench-scale_demo-%05d-config__ConfigMap","v":"v1"},{"id":"bench-scale_demo-%05d__Service","v":"v1"}]}}}`,
		i, i, 1000+i, i, i)
}

func decodeDemo(t testing.TB, i int) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(demoJSON(i)); err != nil {
		t.Fatal(err)
	}
	return u
}

func sameString(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }

// stringsOf appends the map keys and string values of an unstructured value to out.
func stringsOf(v any, out []string) []string {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			out = stringsOf(e, append(out, k))
		}
	case []any:
		for _, e := range t {
			out = stringsOf(e, out)
		}
	case string:
		out = append(out, t)
	}
	return out
}

// TestSharedStringsKeepsContentAndSharesIt: two objects through the transform hold equal
// content to what came in, and share one copy of the strings they repeat.
func TestSharedStringsKeepsContentAndSharesIt(t *testing.T) {
	transform := SharedStrings(nil)
	var out [2]*unstructured.Unstructured
	for i := range out {
		in := decodeDemo(t, i)
		want := in.DeepCopy()
		got, err := transform(in)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = got.(*unstructured.Unstructured)
		if !equality.Semantic.DeepEqual(out[i].Object, want.Object) {
			t.Fatalf("the transform changed the object:\n got %v\nwant %v", out[i].Object, want.Object)
		}
	}
	// The table is direct-mapped: a string evicted by a colliding one between the two objects
	// is copied again, by design. Nearly all must be shared, not each.
	first := map[string]string{}
	for _, str := range stringsOf(out[0].Object, nil) {
		first[str] = str
	}
	repeated, shared := 0, 0
	for _, str := range stringsOf(out[1].Object, nil) {
		if f, ok := first[str]; ok && len(str) <= maxInterned {
			repeated++
			if sameString(f, str) {
				shared++
			}
		}
	}
	if repeated < 30 || shared*10 < repeated*8 {
		t.Errorf("the second object shares %d of the %d short strings it repeats from the first; want at least 80%%", shared, repeated)
	}

	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{LabelManagedBy: string([]byte(ManagedByValue))}},
		BinaryData: map[string][]byte{"blob": {1, 2, 3}},
	}
	cm2 := cm.DeepCopy()
	cm2.Labels[LabelManagedBy] = string([]byte(ManagedByValue))
	for _, o := range []*corev1.ConfigMap{cm, cm2} {
		if _, err := transform(o); err != nil {
			t.Fatal(err)
		}
	}
	if !sameString(cm.Labels[LabelManagedBy], cm2.Labels[LabelManagedBy]) || cm.Labels[LabelManagedBy] != ManagedByValue {
		t.Error("two typed objects hold separate copies of the same label value")
	}
	if string(cm.BinaryData["blob"]) != "\x01\x02\x03" {
		t.Errorf("binary data changed: %v", cm.BinaryData)
	}
}

// TestSharedStringsShrinksCachedResources: what a cache holds of many reconciled resources is
// measured with and without the transform.
func TestSharedStringsShrinksCachedResources(t *testing.T) {
	const n = 2000
	held := func(transform func(any) (any, error)) uint64 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		objs := make([]any, n)
		for i := range objs {
			objs[i], _ = transform(decodeDemo(t, i))
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(objs)
		return after.HeapAlloc - before.HeapAlloc
	}
	plain := held(func(o any) (any, error) { return o, nil })
	shared := held(SharedStrings(nil))
	t.Logf("%d resources: %d bytes each as decoded, %d with shared strings", n, plain/n, shared/n)
	if shared*5 > plain*4 {
		t.Errorf("shared strings hold %d bytes per resource, decoded %d: want at most four fifths", shared/n, plain/n)
	}
}
