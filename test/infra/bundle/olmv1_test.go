package bundle

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	"sigs.k8s.io/yaml"
)

// OLM v1's rules for a registry+v1 bundle, as operator-controller's documentation states them
// ("Supported extensions", "OLM v1 limitations"): those it checks at install and reports in
// the ClusterExtension's conditions, and those it cannot check.
var (
	// olmv1Dependencies are the dependency properties OLM v1 refuses.
	olmv1Dependencies = []string{"olm.gvk.required", "olm.package.required", "olm.constraint"}
	// olmv1NoAPI is the API OLM v1 does not offer an extension: a bundle that uses it fails.
	olmv1NoAPI = "operatorconditions"
)

// TestBundleMeetsOLMv1Rules: the repository's bundle installs as an OLM v1 ClusterExtension: a
// registry+v1 bundle that supports the AllNamespaces install mode, declares no dependency,
// owns no APIService, is not granted the OperatorConditions API, and whose webhooks each name
// the Deployment that serves them (OLM v1's certificate provider gives that Deployment its
// serving certificate).
func TestBundleMeetsOLMv1Rules(t *testing.T) {
	dir := filepath.Join("..", "..", "..", "bundle")
	var meta struct {
		Annotations map[string]string `json:"annotations"`
	}
	readYAML(t, filepath.Join(dir, "metadata", "annotations.yaml"), &meta)
	if got := meta.Annotations["operators.operatorframework.io.bundle.mediatype.v1"]; got != "registry+v1" {
		t.Errorf("bundle media type %q, want registry+v1", got)
	}
	for _, name := range []string{"dependencies.yaml", "properties.yaml"} {
		var doc struct {
			Dependencies, Properties []struct {
				Type string `json:"type"`
			}
		}
		if readYAML(t, filepath.Join(dir, "metadata", name), &doc) {
			for _, d := range append(doc.Dependencies, doc.Properties...) {
				if slices.Contains(olmv1Dependencies, d.Type) {
					t.Errorf("metadata/%s declares %s, which OLM v1 refuses", name, d.Type)
				}
			}
		}
	}
	csv, err := ReadCSV(filepath.Join(dir, "manifests", CSVFile))
	if err != nil {
		t.Fatal(err)
	}
	checkOLMv1CSV(t, csv)
}

func checkOLMv1CSV(t *testing.T, csv *operatorsv1alpha1.ClusterServiceVersion) {
	allNamespaces := false
	for _, m := range csv.Spec.InstallModes {
		allNamespaces = allNamespaces || (m.Type == operatorsv1alpha1.InstallModeTypeAllNamespaces && m.Supported)
	}
	if !allNamespaces {
		t.Error("the CSV does not support the AllNamespaces install mode, the one OLM v1 installs with")
	}
	if n := len(csv.Spec.APIServiceDefinitions.Owned); n > 0 {
		t.Errorf("the CSV owns %d APIServices; OLM v1 installs none", n)
	}
	install := csv.Spec.InstallStrategy.StrategySpec
	for _, p := range append(install.ClusterPermissions, install.Permissions...) {
		for _, r := range p.Rules {
			if slices.Contains(r.Resources, olmv1NoAPI) {
				t.Errorf("%s is granted %s, an API OLM v1 does not offer", p.ServiceAccountName, olmv1NoAPI)
			}
		}
	}
	deployments := map[string]bool{}
	for _, d := range install.DeploymentSpecs {
		deployments[d.Name] = true
	}
	if len(csv.Spec.WebhookDefinitions) == 0 {
		t.Error("the CSV has no webhooks: the README's OLM v1 caveat about them is out of date")
	}
	for _, w := range csv.Spec.WebhookDefinitions {
		if !deployments[w.DeploymentName] {
			t.Errorf("webhook %s names deployment %q, which the CSV does not install", w.GenerateName, w.DeploymentName)
		}
	}
}

// readYAML reads path into out; false when there is no such file.
func readYAML(t *testing.T, path string, out any) bool {
	t.Helper()
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, out); err != nil {
		t.Fatalf("reading %s: %v", path, err)
	}
	return true
}
