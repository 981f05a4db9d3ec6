package objcache

import (
	"encoding/json"
	"reflect"
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	runtimepkg "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// childConfigMap is a child as the API server sends it: labels, owner, spec hash, data, and
// managed fields, which no cache keeps.
func childConfigMap(i int) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name: "demo-config", Namespace: "bench-scale", UID: "u-1", ResourceVersion: "42",
			CreationTimestamp: metav1.Date(2026, 11, 25, 1, 0, 0, 0, metav1.Now().Location()),
			Labels: map[string]string{labelManagedBy: managedByValue, labelInstance: "demo", labelName: "demo",
				labelPartOf: "cloudspace", labelVersion: "0.1.0"},
			Annotations: map[string]string{annotationSpecHash: "0123456789abcdef", "note": "kept whole"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "test.cloudspace.dev/v1", Kind: "Demo", Name: "demo",
				UID: "owner-uid", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "cloudspace-operator", Operation: metav1.ManagedFieldsOperationApply}},
		},
		Data:       map[string]string{"greeting": "hello", "n": string(rune('0' + i%10))},
		BinaryData: map[string][]byte{"blob": {1, 2, 3}},
	}
}

func childService() *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "bench-scale", Labels: map[string]string{labelManagedBy: managedByValue}},
		Spec: corev1.ServiceSpec{
			Ports:     []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http"), Protocol: corev1.ProtocolTCP}},
			Selector:  map[string]string{"app": "demo"},
			ClusterIP: "10.0.0.7", ClusterIPs: []string{"10.0.0.7"}, Type: corev1.ServiceTypeClusterIP,
		},
	}
}

// TestCompactObjectsComeBackWhole: what the caches hand out (DeepCopyObject, on every Get and
// List) is the object as decoded, less its managed fields, of the type it was decoded into;
// what event handlers read of the compact object itself is its metadata, with the kept
// annotations only.
func TestCompactObjectsComeBackWhole(t *testing.T) {
	withAnnotation := decodeDemo(t, 1)
	withAnnotation.SetAnnotations(map[string]string{"a": "b", annotationRetainedFor: "demo.test/x/u"})
	withAnnotation.SetLabels(map[string]string{"team": "a"})
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{labelInstance: "demo"},
		Annotations: map[string]string{"x": "y"}}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	cases := []struct {
		name       string
		readable   Readable
		in         runtimepkg.Object
		kept       map[string]string // annotations
		keptLabels bool
	}{
		{"a resource, unstructured", Readable{}, decodeDemo(t, 0), nil, true},
		{"a resource with annotations, all kept", Readable{}, withAnnotation, map[string]string{"a": "b", annotationRetainedFor: "demo.test/x/u"}, true},
		{"a resource with annotations, some kept", childReadable, withAnnotation, map[string]string{annotationRetainedFor: "demo.test/x/u"}, false},
		{"a typed child", childReadable, childConfigMap(0), nil, false},
		{"a typed child with its kind set", childReadable, childService(), nil, false},
		{"a pod, whose labels are read", childReadable, pod, nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.in.DeepCopyObject()
			want.(metav1.Object).SetManagedFields(nil)
			got, err := CompactFor(nil, tc.readable)(tc.in.DeepCopyObject())
			if err != nil {
				t.Fatal(err)
			}
			c, ok := got.(*compactObject)
			if !ok {
				t.Fatalf("the transform returned %T, want a compact object", got)
			}
			if again, _ := CompactFor(nil, tc.readable)(c); again != c {
				t.Error("a compact object was compacted again")
			}
			whole := c.DeepCopyObject()
			if !equality.Semantic.DeepEqual(whole, want) {
				t.Errorf("handed out:\n%#v\nwant\n%#v", whole, want)
			}
			wantLabels := tc.in.(metav1.Object).GetLabels()
			if !tc.keptLabels {
				wantLabels = nil
			}
			if c.GetName() != tc.in.(metav1.Object).GetName() || !equality.Semantic.DeepEqual(c.GetLabels(), wantLabels) {
				t.Errorf("compact metadata: name %q labels %v, want %v", c.GetName(), c.GetLabels(), wantLabels)
			}
			if tc.readable.Annotation == nil {
				tc.kept = tc.in.(metav1.Object).GetAnnotations()
			}
			if !equality.Semantic.DeepEqual(c.GetAnnotations(), tc.kept) {
				t.Errorf("compact annotations %v, want %v", c.GetAnnotations(), tc.kept)
			}
			if c.GetManagedFields() != nil {
				t.Error("the compact object kept managed fields")
			}
		})
	}
}

// TestCompactObjectsShareWhatTheyRepeat: siblings share their owner's strings, pods with the
// same labels one map of them, and content is compressed against the first of its kind.
func TestCompactObjectsShareWhatTheyRepeat(t *testing.T) {
	transform := CompactFor(nil, childReadable)
	a, _ := transform(childConfigMap(1))
	b, _ := transform(childConfigMap(2))
	ca, cb := a.(*compactObject), b.(*compactObject)
	if !sameString(ca.OwnerReferences[0].Kind, cb.OwnerReferences[0].Kind) {
		t.Error("two children hold separate copies of their owner's kind")
	}
	if ca.codec == nil || ca.codec != cb.codec {
		t.Error("two ConfigMaps' content is not compressed against one dictionary")
	}
	if whole, _ := json.Marshal(childConfigMap(2).Data); len(cb.rest) >= len(whole) {
		t.Errorf("the second ConfigMap's content takes %d bytes, its data alone %d", len(cb.rest), len(whole))
	}
	pod := func() *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{labelInstance: "demo", labelName: "demo"}}}
	}
	pa, _ := transform(pod())
	pb, _ := transform(pod())
	if la, lb := pa.(*compactObject).Labels, pb.(*compactObject).Labels; len(la) == 0 || reflect.ValueOf(la).Pointer() != reflect.ValueOf(lb).Pointer() {
		t.Error("two pods with the same labels hold separate maps")
	}
}

// TestAsUnstructuredReadsWhatHandlersAreHanded: a compact resource, a deletion's last state
// and a plain object all read as the resource; a compact typed object does not.
func TestAsUnstructuredReadsWhatHandlersAreHanded(t *testing.T) {
	transform := Compact(nil)
	demo, _ := transform(decodeDemo(t, 3))
	cm, _ := transform(childConfigMap(3))
	for name, obj := range map[string]any{
		"compact":   demo,
		"tombstone": toolscache.DeletedFinalStateUnknown{Key: "k", Obj: demo},
		"plain":     decodeDemo(t, 3),
	} {
		u, ok := AsUnstructured(obj)
		if !ok || u.GetName() != "demo-00003" {
			t.Errorf("%s: got %v, %v", name, u, ok)
			continue
		}
		if g, _, _ := unstructured.NestedString(u.Object, "spec", "greeting"); g != "hello" {
			t.Errorf("%s: spec.greeting %q", name, g)
		}
	}
	if _, ok := AsUnstructured(cm); ok {
		t.Error("a compact ConfigMap read as unstructured")
	}
}

// TestWholeGivesHandlersTheWholeObject: a pod handed to an event handler compact comes back
// whole, its status and owner included, as the cache's readers see it; a plain one as it is.
func TestWholeGivesHandlersTheWholeObject(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vm-launcher", Labels: map[string]string{"a": "b"},
		OwnerReferences: []metav1.OwnerReference{{Kind: "VirtualMachine", Name: "vm", UID: "u1"}}},
		Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "launcher",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Message: "last words"}}}}}}
	compact, err := CompactFor(nil, childReadable)(pod.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	for name, obj := range map[string]client.Object{"compact": compact.(client.Object), "plain": pod} {
		got, ok := Whole(obj).(*corev1.Pod)
		if !ok || len(got.Status.ContainerStatuses) != 1 || got.Status.ContainerStatuses[0].State.Terminated.Message != "last words" ||
			len(got.OwnerReferences) != 1 || got.OwnerReferences[0].UID != "u1" {
			t.Errorf("%s: %#v, want the whole pod", name, Whole(obj))
		}
	}
}

// TestCompactShrinksCachedResources: what a cache holds of many reconciled resources, decoded
// and compact. Compact must hold at most a fifth: metadata as a struct and the rest as JSON
// alone hold more than that; the dictionary's compression is needed too.
func TestCompactShrinksCachedResources(t *testing.T) {
	const n = 5000
	held := func(transform func(any) (any, error)) uint64 {
		transform(decodeDemo(t, n)) // the dictionary, made once per kind
		settled := func(m *runtime.MemStats) {
			runtime.GC()
			runtime.GC() // pooled compressors are dropped at the second collection
			runtime.ReadMemStats(m)
		}
		var before, after runtime.MemStats
		settled(&before)
		objs := make([]any, n)
		for i := range objs {
			objs[i], _ = transform(decodeDemo(t, i))
		}
		settled(&after)
		runtime.KeepAlive(objs)
		return (after.HeapAlloc - before.HeapAlloc) / n
	}
	plain := held(func(o any) (any, error) { return o, nil })
	compact := held(Compact(nil))
	t.Logf("%d resources: %d bytes each as decoded, %d compact", n, plain, compact)
	if compact*5 > plain {
		t.Errorf("compact resources hold %d bytes each, decoded %d: want at most a fifth", compact, plain)
	}
}
