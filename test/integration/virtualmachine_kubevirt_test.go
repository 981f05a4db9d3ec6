package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/cloudspace-dev/cloudspace-operator/test/framework"
)

func vmBackend(vm *unstructured.Unstructured, want string) func() error {
	return func() error {
		if err := get(vm); err != nil {
			return err
		}
		if got, _, _ := unstructured.NestedString(vm.Object, "status", "backend"); got != want {
			return fmt.Errorf("status.backend %q, want %q", got, want)
		}
		return nil
	}
}

func kubeVirtVM(ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("kubevirt.io/v1")
	u.SetKind("VirtualMachine")
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// TestVirtualMachineBackends: without KubeVirt, auto runs the VM in a launcher pod and an
// explicit kubevirt is refused; once KubeVirt's CRD (generated from kubevirt.io/api by
// hack/thirdparty-crds.sh) is served, auto renders a KubeVirt VirtualMachine that the API server
// accepts against KubeVirt's own schema (its root disk a DataVolume template), while the VM
// already running keeps its backend.
func TestVirtualMachineBackends(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	before := newVM(ns, "before", map[string]any{})
	if err := k8sClient.Create(ctx, before); err != nil {
		t.Fatal(err)
	}
	eventually(t, timeout, vmBackend(before, "pod"))
	if err := get(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "before-launcher"}}); err != nil {
		t.Fatalf("the pod backend's launcher: %v", err)
	}
	if err := get(kubeVirtVM(ns, "before")); !apierrors.IsNotFound(err) && !meta.IsNoMatchError(err) {
		t.Fatalf("a KubeVirt VM without KubeVirt: %v", err)
	}

	crds, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: []string{filepath.Join(framework.RepoRoot(), "test", "testdata", "crds", "kubevirt")}, ErrorIfPathMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// In the order made: the last one's claim may only just be there. The launcher pod's
		// VM has its root disk's claim too; KubeVirt's have a DataVolume instead.
		for _, name := range []string{"before", "after", "explicit"} {
			_ = k8sClient.Delete(context.Background(), newVM(ns, name, nil))
			claims := []string{"-disk"}
			if name == "before" {
				claims = append(claims, "-root")
			}
			for _, claim := range claims {
				releaseProtection(t, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + claim}})
			}
			eventually(t, timeout, func() error { return gone(newVM(ns, name, nil)) })
		}
		if err := envtest.UninstallCRDs(cfg, envtest.CRDInstallOptions{CRDs: crds}); err != nil {
			t.Error(err)
		}
		restartManager(t)
	})
	restartManager(t) // discovery is read at start, as a new operator would

	after := newVM(ns, "after", map[string]any{"runStrategy": "RerunOnFailure", "cpu": "2",
		"cloudInit": map[string]any{"sshAuthorizedKeys": []any{"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB a@b"}}})
	if err := k8sClient.Create(ctx, after); err != nil {
		t.Fatal(err)
	}
	eventually(t, timeout, vmBackend(after, "kubevirt"))
	kv := kubeVirtVM(ns, "after")
	if err := get(kv); err != nil {
		t.Fatalf("KubeVirt's VirtualMachine was not created: %v", err)
	}
	assertOwnedAndApplied(t, kv, after.GetUID())
	if rs, _, _ := unstructured.NestedString(kv.Object, "spec", "runStrategy"); rs != "RerunOnFailure" {
		t.Errorf("KubeVirt runStrategy %q, want RerunOnFailure", rs)
	}
	if cores, _, _ := unstructured.NestedInt64(kv.Object, "spec", "template", "spec", "domain", "cpu", "cores"); cores != 2 {
		t.Errorf("KubeVirt cores %d, want 2", cores)
	}
	// The Persistent root disk, as KubeVirt's own schema admits it: a DataVolume of its own.
	templates, _, _ := unstructured.NestedSlice(kv.Object, "spec", "dataVolumeTemplates")
	if len(templates) != 1 || fmt.Sprint(templates[0].(map[string]any)["metadata"]) != "map[name:after-root]" {
		t.Errorf("KubeVirt dataVolumeTemplates %v, want after-root", templates)
	}
	if err := k8sClient.Create(ctx, newVM(ns, "explicit", map[string]any{"backend": "kubevirt"})); err != nil {
		t.Errorf("backend kubevirt refused with KubeVirt served: %v", err)
	}
	// The VM made before KubeVirt came keeps running where it runs.
	eventually(t, timeout, vmBackend(before, "pod"))
	if err := get(kubeVirtVM(ns, "before")); !apierrors.IsNotFound(err) {
		t.Errorf("the earlier VM moved to KubeVirt: %v", err)
	}
}
