package engine

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestOnlyASealedReleaseIsOne: a release record sealed under the key reads back; one written
// without the key, under another key, moved to another object, or edited after the seal does
// not.
func TestOnlyASealedReleaseIsOne(t *testing.T) {
	key := []byte("record-key-0123456789")
	sealed := func() *metav1.ObjectMeta {
		obj := &metav1.ObjectMeta{Namespace: "team", Name: "dev-home", UID: "u1", Annotations: map[string]string{
			AnnotationRetainedFor: "workspace.infra.cloudspace.dev/dev/w1", AnnotationReleasedAt: "2026-01-02T03:04:05Z"}}
		obj.Annotations[AnnotationReleaseSeal] = releaseSeal(key, obj)
		return obj
	}
	if at, ok := SealedRelease(key, sealed()); !ok || at.Format("2006-01-02T15:04:05Z07:00") != "2026-01-02T03:04:05Z" {
		t.Fatalf("the sealed record: %s, %v; want its release time", at, ok)
	}
	for name, tamper := range map[string]func(*metav1.ObjectMeta) []byte{
		"no seal":                 func(o *metav1.ObjectMeta) []byte { delete(o.Annotations, AnnotationReleaseSeal); return key },
		"another key":             func(*metav1.ObjectMeta) []byte { return []byte("another-key-0123456789") },
		"no key":                  func(*metav1.ObjectMeta) []byte { return nil },
		"copied to another claim": func(o *metav1.ObjectMeta) []byte { o.UID = "u2"; return key },
		"released earlier": func(o *metav1.ObjectMeta) []byte {
			o.Annotations[AnnotationReleasedAt] = "2020-01-01T00:00:00Z"
			return key
		},
		"retained for another": func(o *metav1.ObjectMeta) []byte {
			o.Annotations[AnnotationRetainedFor] = "workspace.infra.cloudspace.dev/x/w2"
			return key
		},
	} {
		obj := sealed()
		if _, ok := SealedRelease(tamper(obj), obj); ok {
			t.Errorf("%s: read as a sealed release", name)
		}
	}
}
