package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// KeepCRDSpecs puts back, into the bundle's CRDs under manifests, the spec of each CRD as
// built from config/crd (built: kustomize's output). operator-sdk v1.34 reads CRDs with Go
// types older than the API server's and writes back only the fields those know: it dropped
// selectableFields, so the OLM-installed operator's field selector on spec.owner was refused
// ("field label not supported") and every workspace create through the API failed.
func KeepCRDSpecs(manifests string, built []byte) error {
	specs, err := crdSpecs(built)
	if err != nil {
		return err
	}
	files, err := filepath.Glob(filepath.Join(manifests, "*.yaml"))
	if err != nil {
		return err
	}
	kept := 0
	for _, path := range files {
		ok, err := keepSpec(path, specs)
		if err != nil {
			return fmt.Errorf("restoring the spec of %s: %w", path, err)
		}
		if ok {
			kept++
		}
	}
	if kept != len(specs) {
		return fmt.Errorf("the bundle holds %d of the %d CRDs built from config/crd", kept, len(specs))
	}
	return nil
}

// crdSpecs reads a stream of YAML documents and returns each CRD's spec by its name.
func crdSpecs(built []byte) (map[string]any, error) {
	specs := map[string]any{}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(built), 4096)
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			return specs, nil
		} else if err != nil {
			return nil, fmt.Errorf("reading the built CRDs: %w", err)
		}
		u := unstructured.Unstructured{Object: doc}
		if u.GetKind() == "CustomResourceDefinition" {
			specs[u.GetName()] = doc["spec"]
		}
	}
}

// keepSpec replaces the spec of the CRD in path with its built one; false when path is no CRD.
func keepSpec(path string, specs map[string]any) (bool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return false, err
	}
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return false, err
	}
	u := unstructured.Unstructured{Object: doc}
	spec, ok := specs[u.GetName()]
	if u.GetKind() != "CustomResourceDefinition" || !ok {
		return false, nil
	}
	doc["spec"] = spec
	out, err := yaml.Marshal(doc)
	if err != nil {
		return false, err
	}
	return true, os.WriteFile(path, out, 0o644)
}
