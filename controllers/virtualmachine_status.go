package controllers

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/engine"
)

// kubeVirtVM is KubeVirt's VirtualMachine, which the kubevirt backend renders.
var kubeVirtVM = schema.GroupVersionKind{Group: "kubevirt.io", Version: "v1", Kind: "VirtualMachine"}

// Status computes the backend, the phase and the guest's whereabouts.
func (l VirtualMachineLifecycle) Status(obj *unstructured.Unstructured, observed engine.Observed) (engine.StatusResult, error) {
	vm, err := decodeVM(obj)
	if err != nil {
		return engine.StatusResult{}, err
	}
	l.Default(vm)
	pods, err := podsOf(observed.Pods)
	if err != nil {
		return engine.StatusResult{}, err
	}
	var kv *unstructured.Unstructured
	for _, c := range observed.Children {
		if c.GroupVersionKind() == kubeVirtVM {
			kv = c
		}
	}
	st, failure := vmStatus(vm, len(observed.Children) > 0, kv, pods)
	fields, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&st)
	if err != nil {
		return engine.StatusResult{}, err
	}
	res := engine.StatusResult{Fields: fields, Failure: failure.message, FailureReason: failure.reason}
	if st.Backend == infrav1alpha1.BackendPod && st.Phase == infrav1alpha1.VMRunning && vm.Status.Phase != infrav1alpha1.VMRunning {
		// The launcher's pod ready: QEMU runs; the guest's boot is its own. The start began
		// when the VM stopped being Ready.
		if pod := readyPod(livePods(pods)); freshStart(notReadySince(vm.Status.Conditions), pod) {
			res.Written = observeStart(vmGVK.Kind, nil, pod)
		}
	}
	return res, nil
}

// vmStatus is the pure phase machine: the VM, whether anything was applied, KubeVirt's VM
// (kubevirt backend) and the guest's pods in; the status out, and why the launcher is failing
// when it is (a crash loop, an image that cannot be pulled).
func vmStatus(vm *infrav1alpha1.VirtualMachine, applied bool, kv *unstructured.Unstructured, pods []corev1.Pod) (infrav1alpha1.VirtualMachineStatus, problem) {
	st := infrav1alpha1.VirtualMachineStatus{Backend: vm.Status.Backend}
	switch {
	case st.Backend != "":
	case kv != nil:
		st.Backend = infrav1alpha1.BackendKubeVirt
	case applied:
		st.Backend = infrav1alpha1.BackendPod
	}
	var failure problem
	if st.Backend == infrav1alpha1.BackendKubeVirt {
		st.Phase, st.Message = kubeVirtPhase(kv)
		if st.Phase == infrav1alpha1.VMFailed {
			failure.message = st.Message
		}
	} else {
		st.Restarts, failure = podProblems(pods)
		st.Phase, st.Message = podPhase(vm.Spec.RunStrategy, pods)
		if failure.message != "" && st.Phase != infrav1alpha1.VMStopping {
			st.Phase, st.Message = infrav1alpha1.VMFailed, "the launcher is failing: "+failure.message
		}
	}
	if st.Phase == infrav1alpha1.VMRunning {
		if p := readyPod(livePods(pods)); p != nil {
			st.NodeName, st.IP = p.Spec.NodeName, p.Status.PodIP
		}
	}
	st.Status = string(st.Phase)
	return st, failure
}

// podPhase reads the launcher pod: the run strategy is the kubelet's restart policy, so a pod
// that has ended is a guest that stays stopped (Succeeded: powered off) or failed.
func podPhase(strategy infrav1alpha1.RunStrategy, pods []corev1.Pod) (infrav1alpha1.VirtualMachinePhase, string) {
	if len(pods) == 0 {
		if strategy == infrav1alpha1.RunHalted {
			return infrav1alpha1.VMStopped, "halted; the disk is kept"
		}
		return infrav1alpha1.VMPending, "waiting for the launcher pod"
	}
	p := &pods[0]
	switch {
	case p.DeletionTimestamp != nil:
		return infrav1alpha1.VMStopping, "the guest was asked to power off"
	case p.Status.Phase == corev1.PodSucceeded:
		return infrav1alpha1.VMStopped, "the guest powered off"
	case p.Status.Phase == corev1.PodFailed:
		return infrav1alpha1.VMFailed, "the launcher failed: " + terminatedReason(p)
	case p.Spec.NodeName == "":
		return infrav1alpha1.VMScheduling, "waiting for a node" + unschedulable(p)
	case readyPod([]corev1.Pod{*p}) == nil:
		return infrav1alpha1.VMStarting, "the guest is booting on " + p.Spec.NodeName
	}
	return infrav1alpha1.VMRunning, accelNote(p)
}

// SoftwareEmulationMessage is a running VM's status message when its guest runs without KVM.
const SoftwareEmulationMessage = "running in software emulation (slow): no /dev/kvm device resource is configured (--vm-kvm-resource)"

// accelNote says when the launcher runs the guest in software emulation (VM_ACCEL=tcg).
func accelNote(p *corev1.Pod) string {
	for _, c := range p.Spec.Containers {
		for _, e := range c.Env {
			if e.Name == "VM_ACCEL" && e.Value == "tcg" {
				return SoftwareEmulationMessage
			}
		}
	}
	return ""
}

func terminatedReason(p *corev1.Pod) string {
	for _, c := range p.Status.ContainerStatuses {
		if t := c.State.Terminated; t != nil {
			return fmt.Sprintf("%s exited %d (%s)", c.Name, t.ExitCode, t.Reason)
		}
	}
	return p.Status.Reason
}

func unschedulable(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Message != "" {
			return ": " + c.Message
		}
	}
	return ""
}

// kubeVirtPhases maps KubeVirt's printableStatus onto our phases.
var kubeVirtPhases = map[string]infrav1alpha1.VirtualMachinePhase{
	"Stopped": infrav1alpha1.VMStopped, "Provisioning": infrav1alpha1.VMScheduling,
	"WaitingForVolumeBinding": infrav1alpha1.VMScheduling, "ErrorUnschedulable": infrav1alpha1.VMScheduling,
	"Starting": infrav1alpha1.VMStarting, "Running": infrav1alpha1.VMRunning, "Paused": infrav1alpha1.VMRunning,
	"Migrating": infrav1alpha1.VMRunning, "Stopping": infrav1alpha1.VMStopping, "Terminating": infrav1alpha1.VMStopping,
	"CrashLoopBackOff": infrav1alpha1.VMFailed, "ErrorImagePull": infrav1alpha1.VMFailed,
	"ImagePullBackOff": infrav1alpha1.VMFailed, "ErrorPvcNotFound": infrav1alpha1.VMFailed,
}

func kubeVirtPhase(kv *unstructured.Unstructured) (infrav1alpha1.VirtualMachinePhase, string) {
	if kv == nil {
		return infrav1alpha1.VMPending, "waiting for KubeVirt's VirtualMachine"
	}
	printable, _, _ := unstructured.NestedString(kv.Object, "status", "printableStatus")
	if phase, ok := kubeVirtPhases[printable]; ok {
		return phase, "KubeVirt: " + printable
	}
	return infrav1alpha1.VMPending, "waiting for KubeVirt to report the VM"
}
