package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/engine"
)

var proxyEnv = []corev1.EnvVar{
	{Name: "HTTP_PROXY", Value: "http://proxy.example:3128"}, {Name: "http_proxy", Value: "http://proxy.example:3128"},
	{Name: "HTTPS_PROXY", Value: "http://proxy.example:3128"}, {Name: "https_proxy", Value: "http://proxy.example:3128"},
	{Name: "NO_PROXY", Value: ".svc,.cluster.local"}, {Name: "no_proxy", Value: ".svc,.cluster.local"},
}

// proxied reports, for every container of spec, whether it carries all three proxy variables
// in both cases (want true) or none of them (want false).
func proxied(spec corev1.PodSpec, want bool) error {
	for _, c := range append(spec.InitContainers, spec.Containers...) {
		n := 0
		for _, e := range c.Env {
			for _, p := range proxyEnv {
				if e.Name == p.Name && e.Value == p.Value {
					n++
				}
			}
		}
		if want && n != len(proxyEnv) || !want && n != 0 {
			return fmt.Errorf("container %s has %d of the %d proxy variables, want them all: %v", c.Name, n, len(proxyEnv), want)
		}
	}
	return nil
}

// TestOperandsGetTheOperatorsProxy: an operator given proxy settings (OLM sets HTTP_PROXY,
// HTTPS_PROXY and NO_PROXY on it) passes them to every operand container — the workspace's
// clone and IDE, the VM launcher; without them, no variable is added.
func TestOperandsGetTheOperatorsProxy(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	ws := newWorkspace(t, ns, "proxied", infrav1alpha1.WorkspaceSpec{Owner: "alice", Git: &infrav1alpha1.WorkspaceGit{URL: "https://example.com/a.git"}})
	vm := newVM(ns, "proxied-vm", map[string]any{"backend": "pod"})
	if err := k8sClient.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ws.Name}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "proxied-vm-launcher"}}
	check := func(want bool) func() error {
		return func() error {
			if err := get(dep); err != nil {
				return err
			}
			if err := proxied(dep.Spec.Template.Spec, want); err != nil {
				return fmt.Errorf("workspace: %w", err)
			}
			if err := get(pod); err != nil {
				return err
			}
			if err := proxied(pod.Spec, want); err != nil {
				return fmt.Errorf("launcher: %w", err)
			}
			return nil
		}
	}
	eventually(t, timeout, check(false))
	unchangedByRestart(t, ns, dep, pod)
	t.Cleanup(func() { restartManager(t) })
	if err := operator.stop(); err != nil {
		t.Fatal(err)
	}
	var err error
	if operator, err = startManagerWith([]engine.Option{engine.WithOperandEnv(proxyEnv)}); err != nil {
		t.Fatal(err)
	}
	eventually(t, timeout, check(true))
}

// unchangedByRestart restarts the operator, still without proxy settings, over objs (children
// of two resources) and checks that it writes none of them: no operand variable means no change.
func unchangedByRestart(t *testing.T, ns string, objs ...client.Object) {
	t.Helper()
	before := map[string]string{}
	for _, o := range objs {
		before[o.GetName()] = o.GetResourceVersion()
	}
	restartManager(t, ns)
	start := reconciles()
	eventually(t, timeout, func() error {
		if n := reconciles() - start; n < float64(len(objs)) {
			return fmt.Errorf("%v reconciles since the restart", n)
		}
		return nil
	})
	for end := time.Now().Add(settle); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		for _, o := range objs {
			if err := get(o); err != nil {
				t.Fatal(err)
			}
			if o.GetResourceVersion() != before[o.GetName()] {
				t.Fatalf("%s was written by an operator restarted without a proxy", o.GetName())
			}
		}
	}
}
