package app

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestCacheOptions(t *testing.T) {
	if opts := CacheOptions(nil); opts.DefaultNamespaces != nil {
		t.Errorf("no watch namespaces: the cache holds %v, want every namespace", opts.DefaultNamespaces)
	}
	opts := CacheOptions([]string{"dev", "staging"})
	if _, ok := opts.DefaultNamespaces["staging"]; len(opts.DefaultNamespaces) != 2 || !ok {
		t.Errorf("the cache holds %v, want dev and staging", opts.DefaultNamespaces)
	}
	obj := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "a", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}}}
	out, err := opts.DefaultTransform(obj)
	if err != nil {
		t.Fatal(err)
	}
	if got := out.(*metav1.PartialObjectMetadata); got.ManagedFields != nil || got.Name != "a" {
		t.Errorf("transformed = %+v, want the object without its managed fields", got)
	}
}
