// Command csvdesc writes the owned-CRD entries of the ClusterServiceVersion base (config/manifests)
// from the CRDs and the API's Go types: each kind's description and a descriptor for every
// field (csvdesc.go). The display names and resources the base gives by hand are kept.
// make bundle runs it before operator-sdk, which keeps the entries it finds in the base.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
)

func main() {
	crds := flag.String("crds", "config/crd/bases", "directory of the CRDs controller-gen writes")
	base := flag.String("csv", "config/manifests/bases/cloudspace-operator.clusterserviceversion.yaml", "the ClusterServiceVersion base to update")
	flag.Parse()
	if err := run(*crds, *base); err != nil {
		fmt.Fprintln(os.Stderr, "csvdesc:", err)
		os.Exit(1)
	}
}

func run(crdDir, basePath string) error {
	scheme := runtime.NewScheme()
	if err := infrav1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	csv := &operatorsv1alpha1.ClusterServiceVersion{}
	if err := readYAML(basePath, csv); err != nil {
		return err
	}
	files, err := filepath.Glob(filepath.Join(crdDir, "*.yaml"))
	if err != nil {
		return err
	}
	owned := csv.Spec.CustomResourceDefinitions.Owned
	for _, f := range files {
		crd := &apiextv1.CustomResourceDefinition{}
		if err := readYAML(f, crd); err != nil {
			return err
		}
		d, err := describe(scheme, crd)
		if err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		owned = Merge(owned, d)
	}
	csv.Spec.CustomResourceDefinitions.Owned = owned
	out, err := yaml.Marshal(csv)
	if err != nil {
		return err
	}
	return os.WriteFile(basePath, out, 0o644)
}

// describe describes crd from its Go type in scheme.
func describe(scheme *runtime.Scheme, crd *apiextv1.CustomResourceDefinition) (operatorsv1alpha1.CRDDescription, error) {
	for _, v := range crd.Spec.Versions {
		if !v.Storage {
			continue
		}
		obj, err := scheme.New(schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind})
		if err != nil {
			return operatorsv1alpha1.CRDDescription{}, err
		}
		return Describe(crd, obj)
	}
	return operatorsv1alpha1.CRDDescription{}, fmt.Errorf("CRD %s has no storage version", crd.Name)
}

func readYAML(path string, into any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := yaml.Unmarshal(data, into); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
