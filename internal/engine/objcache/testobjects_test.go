package objcache

import (
	"fmt"
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The labels and annotations the engine puts on its children, which the tests' objects carry;
// objcache itself knows none of them.
const (
	labelManagedBy        = "app.kubernetes.io/managed-by"
	managedByValue        = "cloudspace-operator"
	labelInstance         = "app.kubernetes.io/instance"
	labelName             = "app.kubernetes.io/name"
	labelPartOf           = "app.kubernetes.io/part-of"
	labelVersion          = "app.kubernetes.io/version"
	annotationSpecHash    = "infra.cloudspace.dev/spec-hash"
	annotationRetainedFor = "infra.cloudspace.dev/retained-for"
)

// childReadable is what the engine's child cache reads of its objects' metadata (the engine's
// own childReadable): the retained-for record and the stub mark of every object, and the
// labels of pods alone.
var childReadable = Readable{
	Annotation: func(key string) bool { return key == annotationRetainedFor || key == AnnotationTrimmed },
	Labels:     func(obj any) bool { _, pod := obj.(*corev1.Pod); return pod },
}

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
