package app

import (
	"os"
	"strconv"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientfeatures "k8s.io/client-go/features"
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
	// What the cache hands out is a copy of what it holds (DeepCopyObject).
	if got := out.(runtime.Object).DeepCopyObject().(*metav1.PartialObjectMetadata); got.ManagedFields != nil || got.Name != "a" {
		t.Errorf("handed out %+v, want the object without its managed fields", got)
	}
}

// TestInformersStreamTheirLists: unless the environment says otherwise, client-go's informers
// stream their initial lists.
func TestInformersStreamTheirLists(t *testing.T) {
	want := true
	if v, set := os.LookupEnv(watchListEnv); set {
		want, _ = strconv.ParseBool(v)
	}
	if err := StreamInitialLists(); err != nil {
		t.Fatal(err)
	}
	if got := clientfeatures.FeatureGates().Enabled(clientfeatures.WatchListClient); got != want {
		t.Errorf("WatchListClient is %v, want %v", got, want)
	}
}
