package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
)

// longestName is a name of 63 characters, the most a DNS label (a Service's name) holds.
func longestName(prefix string) string {
	return prefix + strings.Repeat("x", 62-len(prefix)) + "1"
}

// TestTheLongestNamesGetEveryChild: a Workspace and a VirtualMachine named with 63 characters
// get every child the API server must accept, those named with a suffix included, and the
// Workspace runs.
func TestTheLongestNamesGetEveryChild(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	name := longestName("ws-")
	ws := newWorkspace(t, ns, name, infrav1alpha1.WorkspaceSpec{Owner: "alice", Ingress: &infrav1alpha1.WorkspaceIngress{Host: "long.ide.example.com"}})
	vmName := longestName("vm-")
	// An idle timeout: the launcher then serves its activity, behind a policy of its own.
	vm := newVM(ns, vmName, map[string]any{"backend": "pod", "idleTimeout": "10m"})
	if err := k8sClient.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	meta := func(n string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: ns, Name: n} }
	children := []client.Object{
		&appsv1.Deployment{ObjectMeta: meta(name)}, &corev1.PersistentVolumeClaim{ObjectMeta: meta(name + "-home")},
		&corev1.Secret{ObjectMeta: meta(name + "-access")}, &corev1.Service{ObjectMeta: meta(name)},
		&networkingv1.NetworkPolicy{ObjectMeta: meta(name)}, &networkingv1.Ingress{ObjectMeta: meta(name)},
		&corev1.Pod{ObjectMeta: meta(vmName + "-launcher")}, &corev1.PersistentVolumeClaim{ObjectMeta: meta(vmName + "-disk")},
		&corev1.PersistentVolumeClaim{ObjectMeta: meta(vmName + "-root")},
		&corev1.Secret{ObjectMeta: meta(vmName + "-cloudinit")}, &corev1.Service{ObjectMeta: meta(vmName)},
		&networkingv1.NetworkPolicy{ObjectMeta: meta(vmName)}, &networkingv1.NetworkPolicy{ObjectMeta: meta(vmName + "-activity")},
	}
	eventually(t, timeout, func() error {
		for _, c := range children {
			if err := get(c); err != nil {
				return fmt.Errorf("%T %s: %w", c, c.GetName(), err)
			}
		}
		return nil
	})
	ideReady(t, ws)
	eventually(t, timeout, phase(ws, infrav1alpha1.WorkspaceRunning))
}
