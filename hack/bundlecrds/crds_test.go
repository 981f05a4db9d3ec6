package main

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestBundleCRDsAreTheGeneratedOnes: every CRD the bundle installs has the spec controller-gen
// generated. operator-sdk's bundle once lacked the Workspace's selectableFields, and the
// operator OLM installed could not create a workspace through its API.
func TestBundleCRDsAreTheGeneratedOnes(t *testing.T) {
	generated, err := filepath.Glob(filepath.Join("..", "..", "config", "crd", "bases", "*.yaml"))
	if err != nil || len(generated) == 0 {
		t.Fatalf("no generated CRDs: %v", err)
	}
	for _, path := range generated {
		want := specOf(t, path)
		got := specOf(t, filepath.Join("..", "..", "bundle", "manifests", filepath.Base(path)))
		if !reflect.DeepEqual(got, want) {
			t.Errorf("bundle/manifests/%s: its spec is not config/crd's (run make bundle)", filepath.Base(path))
		}
	}
}

func specOf(t *testing.T, path string) any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	return doc["spec"]
}
