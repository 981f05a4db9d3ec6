package engine

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestAddOperandEnv(t *testing.T) {
	proxy := []corev1.EnvVar{{Name: "HTTP_PROXY", Value: "http://proxy:3128"}, {Name: "NO_PROXY", Value: ".svc"}}
	containers := func() []any {
		return []any{map[string]any{"name": "a", "env": []any{map[string]any{"name": "NO_PROXY", "value": "chart's own"}}}}
	}
	for _, tc := range []struct {
		name, apiVersion, kind string
		path                   []string
		wantEnv                int // variables in the container afterwards
	}{
		{"Deployment", "apps/v1", "Deployment", []string{"spec", "template", "spec"}, 2},
		{"DaemonSet", "apps/v1", "DaemonSet", []string{"spec", "template", "spec"}, 2},
		{"bare Pod", "v1", "Pod", []string{"spec"}, 2},
		{"CronJob", "batch/v1", "CronJob", []string{"spec", "jobTemplate", "spec", "template", "spec"}, 2},
		{"a kind with no pods", "v1", "Service", []string{"spec", "template", "spec"}, 1},
		{"another group's Pod", "example.com/v1", "Pod", []string{"spec"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": tc.apiVersion, "kind": tc.kind}}
			if err := unstructured.SetNestedSlice(obj.Object, containers(), append(tc.path, "containers")...); err != nil {
				t.Fatal(err)
			}
			if err := addOperandEnv(obj, proxy); err != nil {
				t.Fatal(err)
			}
			got, _, _ := unstructured.NestedSlice(obj.Object, append(tc.path, "containers")...)
			env := got[0].(map[string]any)["env"].([]any)
			if len(env) != tc.wantEnv {
				t.Fatalf("env = %v, want %d variables", env, tc.wantEnv)
			}
			if v := env[0].(map[string]any)["value"]; v != "chart's own" {
				t.Errorf("the chart's NO_PROXY became %v", v)
			}
		})
	}
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Pod",
		"spec": map[string]any{"containers": []any{map[string]any{"name": "a"}}}}}
	before := obj.DeepCopy()
	if err := addOperandEnv(obj, nil); err != nil || !equalObjects(obj, before) {
		t.Errorf("no operand env changed the pod: %v", obj.Object)
	}
}

func equalObjects(a, b *unstructured.Unstructured) bool {
	return subset(a.Object, a.Object, b.Object) && subset(b.Object, b.Object, a.Object)
}
