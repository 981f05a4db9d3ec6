package integration

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
)

// TestAHibernatedVMSaysSoAndItsResumeIsRead: a VM with stopAction Hibernate is halted; its
// launcher's last words ("hibernated: ... (286 MiB)") are in its pod's status only between the
// kubelet's last status update and its delete, which here follow each other at once. The VM's
// status records them all the same (Saved, 286Mi, its message saying a start resumes it, a
// Hibernation event); started again, its launcher's activity answer says it resumed, and the
// status says Resumed. Its stopAction set to PowerOff, its launcher is replaced at once (the VM
// may never leave Running in its status): the replaced one's state and the new one's resume are
// recorded all the same.
func TestAHibernatedVMSaysSoAndItsResumeIsRead(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	vm := &infrav1alpha1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sleeper"},
		Spec: infrav1alpha1.VirtualMachineSpec{Backend: infrav1alpha1.BackendPod, StopAction: infrav1alpha1.StopHibernate}}
	if err := k8sClient.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	var resumedMiB atomic.Int64 // 0: the launcher resumed nothing
	fakeLauncher(t, 9922, vm.UID, vm.UID, func() map[string]any {
		answer := activityAnswer(1, 0)
		if mib := resumedMiB.Load(); mib > 0 {
			answer["resumedMiB"] = mib
		}
		return answer
	})
	pod := launcherRunningSince(t, ns, vm.Name, time.Now().Add(-time.Hour))
	if launcherEnv(pod, "VM_HIBERNATE") != "1" || launcherEnv(pod, "VM_ACTIVITY_PORT") != "9922" {
		t.Fatalf("VM_HIBERNATE %q, VM_ACTIVITY_PORT %q; want 1 and 9922", launcherEnv(pod, "VM_HIBERNATE"), launcherEnv(pod, "VM_ACTIVITY_PORT"))
	}
	waitVMPhase(t, vm, infrav1alpha1.VMRunning)

	setVMRunStrategy(t, vm, infrav1alpha1.RunHalted)
	launcherHibernated(t, pod, 286)
	eventually(t, timeout, func() error {
		if err := getVM(vm); err != nil {
			return err
		}
		h := vm.Status.Hibernation
		if vm.Status.Phase != infrav1alpha1.VMStopped || h == nil || h.State != infrav1alpha1.HibernationSaved || h.Size == nil || h.Size.String() != "286Mi" ||
			!strings.Contains(vm.Status.Message, "the guest's state (286Mi) is saved, and a start resumes it") {
			return fmt.Errorf("phase %s, hibernation %+v: %s", vm.Status.Phase, h, vm.Status.Message)
		}
		return eventOn(vm, corev1.EventTypeNormal, infrav1alpha1.EventHibernation, "hibernated: the guest's state (286Mi) is saved")
	})

	resumedMiB.Store(286)
	setVMRunStrategy(t, vm, infrav1alpha1.RunAlways)
	pod = launcherRunningSince(t, ns, vm.Name, time.Now())
	waitResumed(t, vm, "286Mi")

	resumedMiB.Store(0)
	if err := getVM(vm); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(vm.DeepCopy())
	vm.Spec.StopAction = infrav1alpha1.StopPowerOff
	if err := k8sClient.Patch(ctx, vm, patch); err != nil {
		t.Fatal(err)
	}
	launcherHibernated(t, pod, 300)
	resumedMiB.Store(300)
	launcherRunningSince(t, ns, vm.Name, time.Now())
	waitResumed(t, vm, "300Mi")
}

// launcherHibernated plays the kubelet for a launcher pod being deleted that hibernated its
// guest: the container ended with its last words, then the pod deleted at once.
func launcherHibernated(t *testing.T, pod *corev1.Pod, mib int) {
	t.Helper()
	eventually(t, timeout, func() error {
		if err := get(pod); err != nil {
			return err
		}
		if pod.DeletionTimestamp == nil {
			return fmt.Errorf("the launcher pod is not being deleted")
		}
		return nil
	})
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "launcher", Image: "launcher",
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", FinishedAt: metav1.Now(),
			Message: fmt.Sprintf("vm-launcher: hibernated: the guest's state (%d MiB) is saved; the next start resumes it\n", mib)}}}}
	if err := k8sClient.Status().Update(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if err := k8sClient.Delete(context.Background(), pod, &client.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
}

// waitResumed waits until vm runs, its status saying it resumed a state of size, as its event does.
func waitResumed(t *testing.T, vm *infrav1alpha1.VirtualMachine, size string) {
	t.Helper()
	eventually(t, timeout, func() error {
		if err := getVM(vm); err != nil {
			return err
		}
		if h := vm.Status.Hibernation; vm.Status.Phase != infrav1alpha1.VMRunning || h == nil || h.State != infrav1alpha1.HibernationResumed ||
			h.Size == nil || h.Size.String() != size {
			return fmt.Errorf("phase %s, hibernation %+v: %s", vm.Status.Phase, h, vm.Status.Message)
		}
		return eventOn(vm, corev1.EventTypeNormal, infrav1alpha1.EventHibernation, "resumed the guest from its saved state ("+size+")")
	})
}

// waitVMPhase waits until vm is in phase.
func waitVMPhase(t *testing.T, vm *infrav1alpha1.VirtualMachine, phase infrav1alpha1.VirtualMachinePhase) {
	t.Helper()
	eventually(t, timeout, func() error {
		if err := getVM(vm); err != nil {
			return err
		}
		if vm.Status.Phase != phase {
			return fmt.Errorf("phase %s, want %s: %s", vm.Status.Phase, phase, vm.Status.Message)
		}
		return nil
	})
}

// setVMRunStrategy sets vm's run strategy.
func setVMRunStrategy(t *testing.T, vm *infrav1alpha1.VirtualMachine, s infrav1alpha1.RunStrategy) {
	t.Helper()
	if err := getVM(vm); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(vm.DeepCopy())
	vm.Spec.RunStrategy = s
	if err := k8sClient.Patch(context.Background(), vm, patch); err != nil {
		t.Fatal(err)
	}
}
