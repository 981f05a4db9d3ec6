package integration

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/access"
)

// fakeLauncher serves /activity on 127.0.0.1:port as vm-launcher does: over TLS with the
// credentials of the VM whose UID is servedAs, to the bearer token of the VM whose UID is uid,
// answering what answer gives.
func fakeLauncher(t *testing.T, port int32, uid, servedAs types.UID, answer func() map[string]any) {
	t.Helper()
	own, err := access.VMActivityCredentials(accessKey, uid)
	if err != nil {
		t.Fatal(err)
	}
	served, err := access.VMActivityCredentials(accessKey, servedAs)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(served.PEM, served.PEM)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port))), &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatalf("the fake launcher cannot listen on its VM's activity port: %v", err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/activity" || r.Header.Get("Authorization") != "Bearer "+own.Token {
			http.Error(w, "", http.StatusUnauthorized)
			return
		}
		_ = json.NewEncoder(w).Encode(answer())
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
}

// activityAnswer is the launcher's answer of a guest with connections open, idle for idleSeconds.
func activityAnswer(connections int, idleSeconds int64) map[string]any {
	return map[string]any{"connections": connections, "idleSeconds": idleSeconds}
}

// launcherRunningSince plays the scheduler and the kubelet for a VM's launcher pod: bound to a
// node, ready since since, at 127.0.0.1, where the fake launcher serves.
func launcherRunningSince(t *testing.T, ns, name string, since time.Time) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-launcher"}}
	eventually(t, timeout, func() error { return get(pod) })
	binding := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pod.Name},
		Target: corev1.ObjectReference{Kind: "Node", Name: "node-a"}}
	if err := k8sClient.SubResource("binding").Create(context.Background(), pod, binding); err != nil {
		t.Fatal(err)
	}
	if err := get(pod); err != nil {
		t.Fatal(err)
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "127.0.0.1", Conditions: []corev1.PodCondition{
		{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(since)},
	}}
	if err := k8sClient.Status().Update(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	return pod
}

func getVM(vm *infrav1alpha1.VirtualMachine) error {
	return k8sClient.Get(context.Background(), client.ObjectKeyFromObject(vm), vm)
}

// TestAnUnusedVMIsWarnedOfThenStoppedAndAUsedOneIsNot: three VMs with a 1m idle timeout whose
// guests booted ten minutes ago. The operator reads their launchers' activity: one with an SSH
// session open runs on, unwarned; one last used 40 s ago is warned of its stop (status,
// event), then stopped, its disk kept, not Degraded, and starts again on a start request; one
// whose launcher answers with another VM's certificate (a tenant's pod posing as it, saying
// "idle") is of unknown use and runs on. Each launcher's activity port steps past the TCP
// ports its guest forwards.
func TestAnUnusedVMIsWarnedOfThenStoppedAndAUsedOneIsNot(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	minute := &metav1.Duration{Duration: time.Minute}
	tenMinutesAgo, lastUse := time.Now().Add(-10*time.Minute), time.Now().Add(-40*time.Second)
	vms := map[string]*infrav1alpha1.VirtualMachine{}
	for i, name := range []string{"idle", "busy", "posed"} {
		ports := []infrav1alpha1.VMPort{{Name: "ssh", Port: 22, Protocol: "TCP"}}
		for p := 0; p < i; p++ {
			ports = append(ports, infrav1alpha1.VMPort{Name: fmt.Sprintf("app%d", p), Port: 9922 + int32(p), Protocol: "TCP"})
		}
		vm := &infrav1alpha1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: infrav1alpha1.VirtualMachineSpec{Backend: infrav1alpha1.BackendPod, IdleTimeout: minute, Ports: ports}}
		if err := k8sClient.Create(ctx, vm); err != nil {
			t.Fatal(err)
		}
		vms[name] = vm
	}
	idle, busy, posed := vms["idle"], vms["busy"], vms["posed"]
	fakeLauncher(t, 9922, idle.UID, idle.UID, func() map[string]any { return activityAnswer(0, int64(time.Since(lastUse).Seconds())) })
	fakeLauncher(t, 9923, busy.UID, busy.UID, func() map[string]any { return activityAnswer(1, 0) })
	fakeLauncher(t, 9924, posed.UID, idle.UID, func() map[string]any { return activityAnswer(0, 3600) })
	for name := range vms {
		pod := launcherRunningSince(t, ns, name, tenMinutesAgo)
		if want := strconv.Itoa(9922 + len(pod.Spec.Containers[0].Ports) - 1); launcherEnv(pod, "VM_ACTIVITY_PORT") != want {
			t.Errorf("%s: VM_ACTIVITY_PORT %q, want %s", name, launcherEnv(pod, "VM_ACTIVITY_PORT"), want)
		}
	}

	eventually(t, timeout, func() error {
		if err := getVM(idle); err != nil {
			return err
		}
		if idle.Status.Phase != infrav1alpha1.VMRunning || idle.Status.IdleStopAt == nil || !strings.Contains(idle.Status.Message, "stops at") {
			return fmt.Errorf("phase %s, idleStopAt %v, %q; want Running with the warning", idle.Status.Phase, idle.Status.IdleStopAt, idle.Status.Message)
		}
		return nil
	})
	if want := lastUse.Add(time.Minute); idle.Status.IdleStopAt.Sub(want).Abs() > 3*time.Second {
		t.Errorf("idleStopAt %s, want a minute after the last use, %s", idle.Status.IdleStopAt, want)
	}
	// No kubelet ends the launcher: once the operator has deleted it, this test does.
	launcher := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "idle-launcher"}}
	eventually(t, 2*timeout, func() error {
		if err := get(launcher); err != nil || launcher.DeletionTimestamp == nil {
			return fmt.Errorf("the launcher pod not being deleted (%v)", err)
		}
		return nil
	})
	if err := getVM(idle); err != nil || idle.Status.Phase != infrav1alpha1.VMStopping || idle.Status.StoppedReason != infrav1alpha1.StoppedIdle {
		t.Errorf("while the guest powers off: %s, stopped %q (%v); want Stopping, Idle", idle.Status.Phase, idle.Status.StoppedReason, err)
	}
	if err := k8sClient.Delete(ctx, launcher, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	eventually(t, timeout, func() error {
		if err := getVM(idle); err != nil {
			return err
		}
		err := get(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "idle-launcher"}})
		if idle.Status.Phase != infrav1alpha1.VMStopped || err == nil {
			return fmt.Errorf("phase %s, launcher pod: %v; want Stopped, the pod gone", idle.Status.Phase, err)
		}
		return nil
	})
	if idle.Status.StoppedReason != infrav1alpha1.StoppedIdle || meta.IsStatusConditionTrue(idle.Status.Conditions, infrav1alpha1.ConditionDegraded) {
		t.Errorf("stopped: reason %q, conditions %v; want Idle, not Degraded", idle.Status.StoppedReason, idle.Status.Conditions)
	}
	if err := get(&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "idle-disk"}}); err != nil {
		t.Errorf("the stopped VM's disk: %v", err)
	}
	eventually(t, timeout, func() error { return eventOn(idle, corev1.EventTypeNormal, infrav1alpha1.EventIdleWarning, "stops at") })
	eventually(t, timeout, func() error {
		return eventOn(idle, corev1.EventTypeNormal, infrav1alpha1.EventStoppedByOperator, "unused")
	})
	for _, vm := range []*infrav1alpha1.VirtualMachine{busy, posed} {
		if err := getVM(vm); err != nil || vm.Status.Phase != infrav1alpha1.VMRunning || vm.Status.IdleStopAt != nil {
			t.Errorf("%s: %s, idleStopAt %v (%v); want Running, unwarned", vm.Name, vm.Status.Phase, vm.Status.IdleStopAt, err)
		}
	}

	patch := client.MergeFrom(idle.DeepCopy())
	idle.Spec.StartRequests++
	if err := k8sClient.Patch(ctx, idle, patch); err != nil {
		t.Fatal(err)
	}
	eventually(t, timeout, func() error {
		return get(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "idle-launcher"}})
	})
	eventually(t, timeout, func() error {
		if err := getVM(idle); err != nil {
			return err
		}
		if idle.Status.StoppedReason != "" {
			return fmt.Errorf("stoppedReason %q after a start request, want none", idle.Status.StoppedReason)
		}
		return nil
	})
}

// TestAVMWhoseLauncherKeepsFailingIsStopped: a launcher that exits with a failure before its
// guest answers, three times in one start (the operator's --vm-max-failed-starts), stops the
// VM: its launcher pod deleted, its disk kept, Degraded with StartFailed and the last exit.
// A start request runs it again.
func TestAVMWhoseLauncherKeepsFailingIsStopped(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	vm := &infrav1alpha1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "crashing"},
		Spec: infrav1alpha1.VirtualMachineSpec{Backend: infrav1alpha1.BackendPod}}
	if err := k8sClient.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	launcher := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "crashing-launcher"}}
	eventually(t, timeout, func() error { return get(launcher) })
	for restarts := int32(1); restarts <= 3; restarts++ {
		launcher.Status = corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
			Name: "launcher", Image: "launcher", RestartCount: restarts,
			State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", Message: "vm-launcher: VM_CPU_MODEL=host needs VM_ACCEL=kvm"}},
		}}}
		if err := k8sClient.Status().Update(ctx, launcher); err != nil {
			t.Fatal(err)
		}
		eventually(t, timeout, func() error {
			if err := getVM(vm); err != nil {
				return err
			}
			if vm.Status.FailedStarts != restarts {
				return fmt.Errorf("failedStarts %d, want %d (%s: %s)", vm.Status.FailedStarts, restarts, vm.Status.Phase, vm.Status.Message)
			}
			return nil
		})
		if err := get(launcher); err != nil && restarts < 3 {
			t.Fatal(err)
		}
	}
	eventually(t, timeout, func() error {
		if err := getVM(vm); err != nil {
			return err
		}
		err := get(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "crashing-launcher"}})
		if vm.Status.Phase != infrav1alpha1.VMStopped || err == nil {
			return fmt.Errorf("phase %s, launcher pod: %v; want Stopped, the pod gone", vm.Status.Phase, err)
		}
		return nil
	})
	degraded := meta.FindStatusCondition(vm.Status.Conditions, infrav1alpha1.ConditionDegraded)
	if vm.Status.StoppedReason != infrav1alpha1.StoppedStartFailed || degraded == nil || degraded.Status != metav1.ConditionTrue ||
		degraded.Reason != infrav1alpha1.ReasonStartFailed || !strings.Contains(degraded.Message, "VM_CPU_MODEL=host needs VM_ACCEL=kvm") {
		t.Errorf("stopped %q, Degraded %+v; want StartFailed with the last exit", vm.Status.StoppedReason, degraded)
	}
	if err := get(&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "crashing-disk"}}); err != nil {
		t.Errorf("the stopped VM's disk: %v", err)
	}
	eventually(t, timeout, func() error {
		return eventOn(vm, corev1.EventTypeNormal, infrav1alpha1.EventStoppedByOperator, "3 failed starts")
	})
	patch := client.MergeFrom(vm.DeepCopy())
	vm.Spec.StartRequests++
	if err := k8sClient.Patch(ctx, vm, patch); err != nil {
		t.Fatal(err)
	}
	eventually(t, timeout, func() error {
		return get(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "crashing-launcher"}})
	})
}
