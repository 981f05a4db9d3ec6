package workspace

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
)

func TestLimits(t *testing.T) {
	q := func(s string) *resource.Quantity { return ptr.To(resource.MustParse(s)) }
	tight := Limits{CPU: resource.MustParse("2")}
	cases := []struct {
		name   string
		limits Limits
		spec   infrav1alpha1.WorkspaceSpec
		field  string
	}{
		{"within the defaults", Limits{}, infrav1alpha1.WorkspaceSpec{Resources: infrav1alpha1.WorkspaceResources{CPU: q("8"), Memory: q("32Gi")}}, ""},
		{"unset fields", Limits{}, infrav1alpha1.WorkspaceSpec{}, ""},
		{"cpu over the default", Limits{}, infrav1alpha1.WorkspaceSpec{Resources: infrav1alpha1.WorkspaceResources{CPU: q("8500m")}}, "spec.resources.cpu"},
		{"storage over the default", Limits{}, infrav1alpha1.WorkspaceSpec{Storage: infrav1alpha1.WorkspaceStorage{Size: q("1Ti")}}, "spec.storage.size"},
		{"cpu over a set limit", tight, infrav1alpha1.WorkspaceSpec{Resources: infrav1alpha1.WorkspaceResources{CPU: q("3")}}, "spec.resources.cpu"},
		{"memory under its default beside a set cpu limit", tight, infrav1alpha1.WorkspaceSpec{Resources: infrav1alpha1.WorkspaceResources{Memory: q("16Gi")}}, ""},
		{"storage beyond any limit, refused without comparing", Limits{}, infrav1alpha1.WorkspaceSpec{Storage: infrav1alpha1.WorkspaceStorage{Size: q("1e999999999")}}, "spec.storage.size"},
	}
	for _, tc := range cases {
		err := tc.limits.Check(&tc.spec)
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("%s: %v, want within limits", tc.name, err)
		case tc.field != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.field+":")):
			t.Errorf("%s: %v, want an error naming %s", tc.name, err, tc.field)
		}
	}
}

// TestLimitsCountTheDefaults: a field left unset renders as its default, so a limit
// below the default refuses it (the CRD fills the same default in on create).
func TestLimitsCountTheDefaults(t *testing.T) {
	low := Limits{Memory: resource.MustParse("1Gi")}
	if err := low.Check(&infrav1alpha1.WorkspaceSpec{}); err == nil || !strings.HasPrefix(err.Error(), "spec.resources.memory:") {
		t.Errorf("no memory (2Gi by default) under a 1Gi limit: %v, want spec.resources.memory refused", err)
	}
}
