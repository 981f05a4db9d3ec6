package engine

import (
	"fmt"
	"testing"
	"unsafe"

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
