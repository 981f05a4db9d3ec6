package controllers

import (
	"strings"
	"testing"

	utiljson "k8s.io/apimachinery/pkg/util/json"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
)

func TestFromUnstructuredNamesTheField(t *testing.T) {
	for _, tc := range []struct {
		spec string
		path string // "" when the spec decodes
	}{
		{`{"image":"busybox","resources":{"limits":{"cpu":"2"}}}`, ""},
		{`7`, "spec: "},
		{`{"image":5}`, "spec.image: "},
		{`{"tolerations":"all"}`, "spec.tolerations: "},
		{`{"resources":{"limits":{"cpu":"lots"}}}`, "spec.resources.limits.cpu: "},
		{`{"env":[{"name":"A"},{"name":"B","value":7}]}`, "spec.env[1].value: "},
		{`{"nodeSelector":{"disk":"ssd","a.b/c":3}}`, "spec.nodeSelector[a.b/c]: "},
	} {
		var spec any
		if err := utiljson.Unmarshal([]byte(tc.spec), &spec); err != nil {
			t.Fatal(err)
		}
		err := fromUnstructured(map[string]any{"spec": spec}, &infrav1alpha1.GenericDaemon{})
		switch {
		case tc.path == "" && err != nil:
			t.Errorf("%s: %v, want decoded", tc.spec, err)
		case tc.path != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.path)):
			t.Errorf("%s: %v, want an error starting %q", tc.spec, err, tc.path)
		}
	}
}
