package controllers

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
)

func TestWorkspaceLimits(t *testing.T) {
	q := func(s string) *resource.Quantity { return ptr.To(resource.MustParse(s)) }
	tight := WorkspaceLimits{CPU: resource.MustParse("2")}
	cases := []struct {
		name   string
		limits WorkspaceLimits
		spec   infrav1alpha1.WorkspaceSpec
		field  string
	}{
		{"within the defaults", WorkspaceLimits{}, infrav1alpha1.WorkspaceSpec{Resources: infrav1alpha1.WorkspaceResources{CPU: q("8"), Memory: q("32Gi")}}, ""},
		{"unset fields", WorkspaceLimits{}, infrav1alpha1.WorkspaceSpec{}, ""},
		{"cpu over the default", WorkspaceLimits{}, infrav1alpha1.WorkspaceSpec{Resources: infrav1alpha1.WorkspaceResources{CPU: q("8500m")}}, "spec.resources.cpu"},
		{"storage over the default", WorkspaceLimits{}, infrav1alpha1.WorkspaceSpec{Storage: infrav1alpha1.WorkspaceStorage{Size: q("1Ti")}}, "spec.storage.size"},
		{"cpu over a set limit", tight, infrav1alpha1.WorkspaceSpec{Resources: infrav1alpha1.WorkspaceResources{CPU: q("3")}}, "spec.resources.cpu"},
		{"memory under its default beside a set cpu limit", tight, infrav1alpha1.WorkspaceSpec{Resources: infrav1alpha1.WorkspaceResources{Memory: q("16Gi")}}, ""},
		{"storage beyond any limit, refused without comparing", WorkspaceLimits{}, infrav1alpha1.WorkspaceSpec{Storage: infrav1alpha1.WorkspaceStorage{Size: q("1e999999999")}}, "spec.storage.size"},
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
