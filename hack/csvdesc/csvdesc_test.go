package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
)

func TestDisplayName(t *testing.T) {
	for in, want := range map[string]string{
		"image":             "Image",
		"storageClassName":  "Storage Class Name",
		"podIP":             "Pod IP",
		"url":               "URL",
		"cpu":               "CPU",
		"tlsSecretName":     "TLS Secret Name",
		"sshAuthorizedKeys": "SSH Authorized Keys",
		"GenericDaemon":     "Generic Daemon",
		"TLSSecret":         "TLS Secret",
	} {
		if got := DisplayName(in); got != want {
			t.Errorf("DisplayName(%q) = %q, want %q", in, got, want)
		}
	}
}

func loadCRD(t *testing.T, plural string) *apiextv1.CustomResourceDefinition {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "crd", "bases", "infra.cloudspace.dev_"+plural+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(data, crd); err != nil {
		t.Fatal(err)
	}
	return crd
}

func specByPath(d operatorsv1alpha1.CRDDescription, path string) *operatorsv1alpha1.SpecDescriptor {
	for i := range d.SpecDescriptors {
		if d.SpecDescriptors[i].Path == path {
			return &d.SpecDescriptors[i]
		}
	}
	return nil
}

// TestDescribeGivesEachFieldItsWidget: the widget follows the field's type, nested fields of our
// own types are grouped under their parent, and descriptions come from the CRD.
func TestDescribeGivesEachFieldItsWidget(t *testing.T) {
	ws, err := Describe(loadCRD(t, "workspaces"), &infrav1alpha1.Workspace{})
	if err != nil {
		t.Fatal(err)
	}
	vm, err := Describe(loadCRD(t, "virtualmachines"), &infrav1alpha1.VirtualMachine{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		d    operatorsv1alpha1.CRDDescription
		path string
		want []string
	}{
		{ws, "owner", []string{xText}},
		{ws, "running", []string{xBoolean}},
		{ws, "port", []string{xNumber}},
		{ws, "storage", nil},
		{ws, "storage.size", []string{xText, fieldGroupDescriptor + "storage"}},
		{ws, "storage.reclaimPolicy", []string{uiPrefix + "select:Retain", uiPrefix + "select:Delete", fieldGroupDescriptor + "storage"}},
		{ws, "storage.storageClassName", []string{xResourcePrefix + "StorageClass", fieldGroupDescriptor + "storage"}},
		{ws, "ingress.tlsSecretName", []string{xResourcePrefix + "Secret", fieldGroupDescriptor + "ingress"}},
		{ws, "env", []string{xAdvanced}},
		{ws, "access.rotation", []string{xNumber, fieldGroupDescriptor + "access"}},
		{vm, "cpu", []string{xText}},
		{vm, "ports[0].port", []string{xNumber, arrayGroupDescriptor + "ports"}},
		{vm, "cloudInit.sshAuthorizedKeys", []string{xAdvanced, fieldGroupDescriptor + "cloudInit"}},
	} {
		got := specByPath(tc.d, tc.path)
		if got == nil {
			t.Errorf("%s: no descriptor for %s", tc.d.Kind, tc.path)
			continue
		}
		if !slices.Equal(got.XDescriptors, tc.want) {
			t.Errorf("%s %s: x-descriptors %v, want %v", tc.d.Kind, tc.path, got.XDescriptors, tc.want)
		}
		if got.Description == "" || strings.Contains(got.Description, "\n") {
			t.Errorf("%s %s: description %q, want one non-empty line", tc.d.Kind, tc.path, got.Description)
		}
	}
	if ws.Description == "" || ws.DisplayName != "Workspace" || vm.DisplayName != "Virtual Machine" {
		t.Errorf("kind descriptions: %q %q %q", ws.Description, ws.DisplayName, vm.DisplayName)
	}
}

// TestDescribeCoversEveryField: every spec field of the CRD's schema and every status field has
// a descriptor, and the status widgets say what the console should show.
func TestDescribeCoversEveryField(t *testing.T) {
	for plural, obj := range map[string]any{
		"genericdaemons":  &infrav1alpha1.GenericDaemon{},
		"workspaces":      &infrav1alpha1.Workspace{},
		"virtualmachines": &infrav1alpha1.VirtualMachine{},
	} {
		crd := loadCRD(t, plural)
		d, err := Describe(crd, obj)
		if err != nil {
			t.Fatal(err)
		}
		schema := crd.Spec.Versions[0].Schema.OpenAPIV3Schema
		for name := range schema.Properties["spec"].Properties {
			if specByPath(d, name) == nil {
				t.Errorf("%s: spec.%s has no descriptor", d.Kind, name)
			}
		}
		var status []string
		for _, s := range d.StatusDescriptors {
			status = append(status, s.Path)
		}
		for name := range schema.Properties["status"].Properties {
			if !slices.Contains(status, name) {
				t.Errorf("%s: status.%s has no descriptor", d.Kind, name)
			}
		}
		for _, s := range d.StatusDescriptors {
			if w, ok := statusWidgets[s.Path]; ok && !slices.Equal(s.XDescriptors, []string{w}) {
				t.Errorf("%s: status %s: %v, want %s", d.Kind, s.Path, s.XDescriptors, w)
			}
		}
	}
}

// TestDescribeRefusesAFieldTheCRDLacks: a Go field the CRD does not know (a CRD not regenerated
// after a change to the types) is an error that names it, not a descriptor without words.
func TestDescribeRefusesAFieldTheCRDLacks(t *testing.T) {
	crd := loadCRD(t, "workspaces")
	storage := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["storage"]
	delete(storage.Properties, "reclaimPolicy")
	_, err := Describe(crd, &infrav1alpha1.Workspace{})
	if err == nil || !strings.Contains(err.Error(), "storage.reclaimPolicy") {
		t.Fatalf("got %v, want an error naming storage.reclaimPolicy", err)
	}
}

// TestMergeKeepsWhatTheBaseSaysByHand: a kind's display name and resources come from the CSV
// base; everything else is replaced; entries are sorted by kind.
func TestMergeKeepsWhatTheBaseSaysByHand(t *testing.T) {
	res := []operatorsv1alpha1.APIResourceReference{{Kind: "Deployment", Version: "v1"}}
	owned := []operatorsv1alpha1.CRDDescription{
		{Name: "workspaces.x", Kind: "Workspace", DisplayName: "IDE Workspace", Resources: res, Description: "old"},
	}
	owned = Merge(owned, operatorsv1alpha1.CRDDescription{Name: "workspaces.x", Kind: "Workspace", DisplayName: "Workspace", Description: "new"})
	owned = Merge(owned, operatorsv1alpha1.CRDDescription{Name: "genericdaemons.x", Kind: "GenericDaemon", DisplayName: "Generic Daemon"})
	if len(owned) != 2 || owned[0].Kind != "GenericDaemon" {
		t.Fatalf("owned = %+v, want GenericDaemon then Workspace", owned)
	}
	ws := owned[1]
	if ws.DisplayName != "IDE Workspace" || ws.Description != "new" || len(ws.Resources) != 1 {
		t.Errorf("workspace entry = %+v", ws)
	}
}
