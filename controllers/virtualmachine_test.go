package controllers

import (
	"time"

	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
)

func vmPod(phase corev1.PodPhase, node string, ready bool, deleting bool) corev1.Pod {
	p := corev1.Pod{Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: phase, PodIP: "10.0.0.7"}}
	if ready {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	}
	if deleting {
		p.DeletionTimestamp = &metav1.Time{}
	}
	return p
}

func TestVMStatusPodBackend(t *testing.T) {
	for _, tc := range []struct {
		name     string
		strategy infrav1alpha1.RunStrategy
		pods     []corev1.Pod
		want     infrav1alpha1.VirtualMachinePhase
		node, ip string
	}{
		{name: "no pod yet", strategy: infrav1alpha1.RunAlways, want: infrav1alpha1.VMPending},
		{name: "unscheduled", strategy: infrav1alpha1.RunAlways, pods: []corev1.Pod{vmPod(corev1.PodPending, "", false, false)},
			want: infrav1alpha1.VMScheduling},
		{name: "booting", strategy: infrav1alpha1.RunAlways, pods: []corev1.Pod{vmPod(corev1.PodRunning, "n1", false, false)},
			want: infrav1alpha1.VMStarting},
		{name: "running", strategy: infrav1alpha1.RunAlways, pods: []corev1.Pod{vmPod(corev1.PodRunning, "n1", true, false)},
			want: infrav1alpha1.VMRunning, node: "n1", ip: "10.0.0.7"},
		{name: "halting", strategy: infrav1alpha1.RunHalted, pods: []corev1.Pod{vmPod(corev1.PodRunning, "n1", true, true)},
			want: infrav1alpha1.VMStopping},
		{name: "halted", strategy: infrav1alpha1.RunHalted, want: infrav1alpha1.VMStopped},
		{name: "powered off, not rerun", strategy: infrav1alpha1.RunRerunOnFailure,
			pods: []corev1.Pod{vmPod(corev1.PodSucceeded, "n1", false, false)}, want: infrav1alpha1.VMStopped},
		{name: "failed, manual", strategy: infrav1alpha1.RunManual, pods: []corev1.Pod{vmPod(corev1.PodFailed, "n1", false, false)},
			want: infrav1alpha1.VMFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vm := &infrav1alpha1.VirtualMachine{Spec: infrav1alpha1.VirtualMachineSpec{RunStrategy: tc.strategy}}
			st, failure := vmStatus(vm, true, nil, tc.pods, 0, time.Now())
			if st.Phase == infrav1alpha1.VMRunning && st.Message != "" {
				t.Errorf("a guest with KVM running: message %q, want none", st.Message)
			}
			if failure != (problem{}) {
				t.Errorf("failure %+v for a launcher that is not failing", failure)
			}
			if st.Phase != tc.want || st.Status != string(tc.want) || st.NodeName != tc.node || st.IP != tc.ip || st.Backend != infrav1alpha1.BackendPod {
				t.Errorf("status = %+v, want phase %s on %q/%q, backend pod", st, tc.want, tc.node, tc.ip)
			}
		})
	}
}

// A guest in software emulation runs, slowly: its status says so, and why.
func TestVMStatusSaysSoftwareEmulation(t *testing.T) {
	pod := vmPod(corev1.PodRunning, "n1", true, false)
	pod.Spec.Containers = []corev1.Container{{Name: "launcher", Env: []corev1.EnvVar{{Name: "VM_ACCEL", Value: "tcg"}}}}
	vm := &infrav1alpha1.VirtualMachine{Spec: infrav1alpha1.VirtualMachineSpec{RunStrategy: infrav1alpha1.RunAlways}}
	st, _ := vmStatus(vm, true, nil, []corev1.Pod{pod}, 0, time.Now())
	if st.Phase != infrav1alpha1.VMRunning || st.Message != SoftwareEmulationMessage {
		t.Errorf("status = %+v, want Running with %q", st, SoftwareEmulationMessage)
	}
}

// A launcher that keeps failing never reaches Failed under restartPolicy Always: the status
// must not say "booting" for ever, but why, with the restarts and the last exit.
func TestVMStatusReportsAFailingLauncher(t *testing.T) {
	crashing := vmPod(corev1.PodRunning, "n1", false, false)
	crashing.Name = "vm-launcher"
	crashing.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "launcher", Image: "reg/vm-launcher:1", RestartCount: 4,
		State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 40s"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", Message: "Could not set up host forwarding rule 'tcp:0.0.0.0:22-:22'"}}}}
	unpullable := vmPod(corev1.PodPending, "n1", false, false)
	unpullable.Name = "vm-launcher"
	unpullable.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "boot-disk", Image: "reg/no-such-disk:1",
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: `Back-off pulling image "reg/no-such-disk:1"`}}}}
	restartedOnce := vmPod(corev1.PodRunning, "n1", false, false)
	restartedOnce.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "launcher", RestartCount: 1,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
	for _, tc := range []struct {
		name     string
		pod      corev1.Pod
		phase    infrav1alpha1.VirtualMachinePhase
		restarts int32
		reason   string
		want     []string
	}{
		{name: "crash loop", pod: crashing, phase: infrav1alpha1.VMFailed, restarts: 4, reason: infrav1alpha1.ReasonCrashLoop,
			want: []string{"launcher", "CrashLoopBackOff", "restarted 4 times", "exit 1 (Error)", "host forwarding"}},
		{name: "image pull", pod: unpullable, phase: infrav1alpha1.VMFailed, restarts: 0, reason: infrav1alpha1.ReasonImagePullFailed,
			want: []string{"boot-disk", `"reg/no-such-disk:1"`, "ImagePullBackOff"}},
		{name: "restarted, booting again", pod: restartedOnce, phase: infrav1alpha1.VMStarting, restarts: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vm := &infrav1alpha1.VirtualMachine{Spec: infrav1alpha1.VirtualMachineSpec{RunStrategy: infrav1alpha1.RunAlways}}
			st, failure := vmStatus(vm, true, nil, []corev1.Pod{tc.pod}, 0, time.Now())
			if st.Phase != tc.phase || st.Restarts != tc.restarts {
				t.Errorf("phase %s, restarts %d; want %s, %d", st.Phase, st.Restarts, tc.phase, tc.restarts)
			}
			if (failure.message == "") != (tc.want == nil) || failure.reason != tc.reason {
				t.Errorf("failure = %+v, want reason %q", failure, tc.reason)
			}
			for _, w := range tc.want {
				if !strings.Contains(failure.message, w) || !strings.Contains(st.Message, w) {
					t.Errorf("failure %q / message %q lacks %q", failure.message, st.Message, w)
				}
			}
		})
	}
}

func TestVMStatusKubeVirtBackend(t *testing.T) {
	kv := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"printableStatus": "Running"}}}
	kv.SetGroupVersionKind(kubeVirtVM)
	vm := &infrav1alpha1.VirtualMachine{}
	st, _ := vmStatus(vm, true, kv, []corev1.Pod{vmPod(corev1.PodRunning, "n2", true, false)}, 0, time.Now())
	if st.Backend != infrav1alpha1.BackendKubeVirt || st.Phase != infrav1alpha1.VMRunning || st.NodeName != "n2" {
		t.Errorf("status = %+v, want kubevirt, Running on n2", st)
	}
	// KubeVirt's failures are the VM's Degraded condition too.
	kv.Object["status"] = map[string]any{"printableStatus": "CrashLoopBackOff"}
	if st, failure := vmStatus(vm, true, kv, nil, 0, time.Now()); st.Phase != infrav1alpha1.VMFailed || failure.message != "KubeVirt: CrashLoopBackOff" {
		t.Errorf("status %+v, failure %q; want Failed, failing with KubeVirt's status", st, failure)
	}
	// A backend once recorded is kept, whatever is rendered now.
	vm.Status.Backend = infrav1alpha1.BackendPod
	if st, _ := vmStatus(vm, true, kv, nil, 0, time.Now()); st.Backend != infrav1alpha1.BackendPod {
		t.Errorf("backend = %s, want the recorded pod", st.Backend)
	}
}

func TestVMCPU(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   intstr.IntOrString
		want int64
		ok   bool
	}{
		{name: "a string", in: intstr.FromString("1"), want: 1, ok: true},
		{name: "a number", in: intstr.FromInt32(4), want: 4, ok: true},
		{name: "zero", in: intstr.FromString("0"), want: 0, ok: false},
		{name: "a fraction", in: intstr.FromString("1.5"), want: 0, ok: false},
		{name: "a leading zero", in: intstr.FromString("01"), want: 0, ok: false},
		{name: "negative", in: intstr.FromInt32(-2), want: 0, ok: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := vmCPU(&tc.in)
			if (err == nil) != tc.ok || got != tc.want {
				t.Errorf("vmCPU(%s) = %d, %v; want %d, ok %v", tc.in.String(), got, err, tc.want, tc.ok)
			}
		})
	}
}

func TestValidateChecksLimitsOnlyOnChange(t *testing.T) {
	cfg := DefaultVMConfig()
	cfg.MaxCPU = 4
	vm := &infrav1alpha1.VirtualMachine{Spec: infrav1alpha1.VirtualMachineSpec{CPU: ptr.To(intstr.FromInt32(8))}}
	cfg.Default(vm)
	if errs := cfg.Validate(vm, nil); len(errs) != 1 || errs[0].Field != "spec.cpu" {
		t.Fatalf("create with 8 CPUs over a limit of 4: %v, want one spec.cpu error", errs)
	}
	old := vm.DeepCopy()
	vm.Spec.Memory = ptr.To(resource.MustParse("2Gi"))
	if errs := cfg.Validate(vm, old); len(errs) != 0 {
		t.Errorf("an update that leaves cpu alone: %v, want allowed", errs)
	}
}

func TestCloudInitUserData(t *testing.T) {
	key := "ssh-ed25519 AAAAC3 a@b"
	for _, tc := range []struct {
		name string
		ci   *infrav1alpha1.VMCloudInit
		want []string
		err  string
	}{
		{name: "none"},
		{name: "user data only", ci: &infrav1alpha1.VMCloudInit{UserData: "#!/bin/sh\n"}, want: []string{"#!/bin/sh"}},
		{name: "keys only", ci: &infrav1alpha1.VMCloudInit{SSHAuthorizedKeys: []string{key}}, want: []string{"#cloud-config\n", "- " + key}},
		{name: "keys into cloud-config",
			ci:   &infrav1alpha1.VMCloudInit{UserData: "#cloud-config\nssh_authorized_keys: [old]\n", SSHAuthorizedKeys: []string{key}},
			want: []string{"- old\n- " + key}},
		{name: "keys with a script", ci: &infrav1alpha1.VMCloudInit{UserData: "#!/bin/sh\n", SSHAuthorizedKeys: []string{key}},
			err: "#cloud-config"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := cloudInitUserData(tc.ci)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("err = %v, want one mentioning %q", err, tc.err)
				}
				return
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("user data %q lacks %q", got, w)
				}
			}
		})
	}
}
