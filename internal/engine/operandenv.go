package engine

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// WithOperandEnv adds env to every container of every pod the charts render (workload
// templates, jobs, bare pods), after the chart's own variables and never over one the chart
// sets: for example the proxy settings OLM gives the operator, which its operands need to reach
// out (operator-lib's proxy.ReadProxyVarsFromEnv). Default: none.
func WithOperandEnv(env []corev1.EnvVar) Option {
	return func(c *config) error {
		for _, e := range env {
			if e.Name == "" || e.ValueFrom != nil {
				return fmt.Errorf("operand env %q: a name and a plain value are needed", e.Name)
			}
		}
		c.operandEnv = env
		return nil
	}
}

// podSpecPaths is where each workload kind keeps its pod spec.
var podSpecPaths = map[string][]string{
	"Pod":                   {"spec"},
	"Deployment":            {"spec", "template", "spec"},
	"StatefulSet":           {"spec", "template", "spec"},
	"DaemonSet":             {"spec", "template", "spec"},
	"ReplicaSet":            {"spec", "template", "spec"},
	"ReplicationController": {"spec", "template", "spec"},
	"Job":                   {"spec", "template", "spec"},
	"CronJob":               {"spec", "jobTemplate", "spec", "template", "spec"},
}

// workloadGroups are the API groups whose kinds podSpecPaths names.
var workloadGroups = map[string]bool{"": true, "apps": true, "batch": true}

// addOperandEnv adds env to every container of obj's pod spec, if obj has one.
func addOperandEnv(obj *unstructured.Unstructured, env []corev1.EnvVar) error {
	path, ok := podSpecPaths[obj.GetKind()]
	if len(env) == 0 || !ok || !workloadGroups[obj.GroupVersionKind().Group] {
		return nil
	}
	spec, found, err := unstructured.NestedMap(obj.Object, path...)
	if err != nil || !found {
		return err
	}
	for _, list := range []string{"initContainers", "containers"} {
		containers, _, err := unstructured.NestedSlice(spec, list)
		if err != nil {
			return fmt.Errorf("%s: %w", describe(obj), err)
		}
		for _, c := range containers {
			if cm, ok := c.(map[string]any); ok {
				cm["env"] = withEnv(cm["env"], env)
			}
		}
		if len(containers) > 0 {
			spec[list] = containers
		}
	}
	return unstructured.SetNestedMap(obj.Object, spec, path...)
}

// withEnv is the container's env list with each of env appended unless it is already there.
func withEnv(current any, env []corev1.EnvVar) []any {
	list, _ := current.([]any)
	set := map[string]bool{}
	for _, e := range list {
		if em, ok := e.(map[string]any); ok {
			set[fmt.Sprint(em["name"])] = true
		}
	}
	for _, e := range env {
		if !set[e.Name] {
			list = append(list, map[string]any{"name": e.Name, "value": e.Value})
		}
	}
	return list
}
