package integration

import (
	"context"
	"errors"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func launcherEnv(p *corev1.Pod, name string) string {
	for _, c := range p.Spec.Containers {
		for _, e := range c.Env {
			if c.Name == "launcher" && e.Name == name {
				return e.Value
			}
		}
	}
	return ""
}

// TestVirtualMachineChangeReplacesTheLauncher: a bare Pod cannot change in place, so a new CPU
// count deletes the launcher pod (the guest gets its grace period) and creates it anew with the
// change, on the same disk.
func TestVirtualMachineChangeReplacesTheLauncher(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	vm := newVM(ns, "grow", map[string]any{"backend": "pod"})
	if err := k8sClient.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "grow-launcher"}}
	disk := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "grow-disk"}}
	// The launcher and its disk are written at once: either may be there first.
	eventually(t, timeout, func() error { return errors.Join(get(pod), get(disk)) })
	first, diskUID := pod.UID, disk.UID
	if got := launcherEnv(pod, "VM_CPUS"); got != "1" {
		t.Fatalf("VM_CPUS = %q, want 1", got)
	}
	if err := k8sClient.Patch(ctx, vm, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"cpu":"2"}}`))); err != nil {
		t.Fatal(err)
	}
	eventually(t, timeout, func() error {
		if err := get(pod); err != nil {
			return err
		}
		if pod.UID == first || launcherEnv(pod, "VM_CPUS") != "2" {
			return fmt.Errorf("launcher %s with VM_CPUS %q, want a new one with 2", pod.UID, launcherEnv(pod, "VM_CPUS"))
		}
		return nil
	})
	assertOwnedAndApplied(t, pod, vm.GetUID())
	if err := get(disk); err != nil || disk.UID != diskUID {
		t.Errorf("the disk changed with the launcher (%v)", err)
	}
}
