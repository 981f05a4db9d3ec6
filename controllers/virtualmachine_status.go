package controllers

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/engine"
)

// kubeVirtVM is KubeVirt's VirtualMachine, which the kubevirt backend renders.
var kubeVirtVM = schema.GroupVersionKind{Group: "kubevirt.io", Version: "v1", Kind: "VirtualMachine"}

// Status computes the backend, the phase and the guest's whereabouts, and stops a VM that is
// unused for its idle timeout.
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
	now := time.Now()
	st, failure := vmStatus(vm, len(observed.Children) > 0, kv, pods, l.MaxFailedStarts, now)
	st, failure = vmOnNode(st, failure, nodeProblem("VM", pods, observed.Children, observed.Nodes))
	l.Hibernations.recorded(vm)
	st = vmHibernationStatus(vm, st, l.Hibernations.of(vm))
	var untilIdleCheck time.Duration
	// Only a VM whose launcher serves its activity has an idle stop (not on KubeVirt).
	if l.idleApplies(vm) {
		idle := l.idle(l.Activity.Of(vm.UID))
		st = vmIdleStatus(vm, st, idle, now)
		untilIdleCheck = idle.untilCheck(st.Phase == infrav1alpha1.VMRunning, vm.Spec.IdleTimeout, st.StartedAt, now)
	}
	untilIdleCheck = soonest(untilIdleCheck, l.untilStartReport(vm, st))
	fields, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&st)
	if err != nil {
		return engine.StatusResult{}, err
	}
	res := engine.StatusResult{Fields: fields, Failure: failure.message, FailureReason: failure.reason,
		RequeueAfter: untilIdleCheck,
		Written:      vmTransitions(vm, st, pods)}
	if !noticeStop(&res, st.StoppedReason != "" && !vm.StoppedByOperator(), st.IdleStopAt, st.Message) {
		if msg, ok := hibernationNotice(vm.Status.Hibernation, st.Hibernation); ok {
			res.Notice = engine.Notice{Reason: infrav1alpha1.EventHibernation, Message: msg}
		}
	}
	return res, nil
}

// vmTransitions is what a new VM status tells the metrics, to observe once it is written: a
// start that made the launcher's pod ready (pod backend), or a stop by the operator.
func vmTransitions(vm *infrav1alpha1.VirtualMachine, st infrav1alpha1.VirtualMachineStatus, pods []corev1.Pod) func() {
	switch {
	case st.Backend == infrav1alpha1.BackendPod && st.Phase == infrav1alpha1.VMRunning && vm.Status.Phase != infrav1alpha1.VMRunning:
		// The launcher's pod ready: QEMU runs; the guest's boot is its own. The start began
		// when the VM stopped being Ready.
		if pod := readyPod(livePods(pods)); freshStart(notReadySince(vm.Status.Conditions), pod) {
			return observeStart(vmGVK.Kind, nil, pod, resumeExpected(vm))
		}
	case st.StoppedReason != "" && !vm.StoppedByOperator():
		return observeStop(vmGVK.Kind, st.StoppedReason)
	}
	return nil
}

// vmStatus is the pure phase machine: the VM, whether anything was applied, KubeVirt's VM
// (kubevirt backend), the guest's pods, the failed starts that stop it (0: none) and the time
// in; the status out, and why the launcher is failing when it is (a crash loop, an image that
// cannot be pulled, the failed starts that stopped it).
func vmStatus(vm *infrav1alpha1.VirtualMachine, applied bool, kv *unstructured.Unstructured, pods []corev1.Pod, maxFailedStarts int, now time.Time) (infrav1alpha1.VirtualMachineStatus, problem) {
	st := infrav1alpha1.VirtualMachineStatus{Backend: vm.Status.Backend}
	switch {
	case st.Backend != "":
	case kv != nil:
		st.Backend = infrav1alpha1.BackendKubeVirt
	case applied:
		st.Backend = infrav1alpha1.BackendPod
	}
	var failure problem
	switch {
	case st.Backend == infrav1alpha1.BackendKubeVirt:
		st.Phase, st.Message = kubeVirtPhase(kv)
		if st.Phase == infrav1alpha1.VMFailed {
			failure.message = st.Message
		}
	case vm.StoppedByOperator():
		st, failure = stoppedVMStatus(vm, st, pods)
	default:
		st.Restarts, failure = podProblems(pods)
		st.Phase, st.Message = podPhase(vm.Spec, pods)
		if failure.message != "" && st.Phase != infrav1alpha1.VMStopping {
			st.Phase, st.Message = infrav1alpha1.VMFailed, "the launcher is failing: "+failure.message
		}
		st, failure = vmFailedStarts(vm, st, pods, failure, maxFailedStarts)
	}
	if st.Phase == infrav1alpha1.VMRunning {
		if p := readyPod(livePods(pods)); p != nil {
			st.NodeName, st.IP = p.Spec.NodeName, p.Status.PodIP
			st.StartedAt = vm.Status.StartedAt
			if vm.Status.Phase != infrav1alpha1.VMRunning || st.StartedAt == nil {
				st.StartedAt = readySince(p, now)
			}
		}
	}
	st.Status = string(st.Phase)
	return st, failure
}

// vmOnNode lets what the launcher's node says explain a VM that is neither running nor failing
// for a reason of its own: a lost node makes it Failed, naming the node; a launcher waiting for
// its disk's node stays Pending, saying so.
func vmOnNode(st infrav1alpha1.VirtualMachineStatus, failure problem, node nodeIssue) (infrav1alpha1.VirtualMachineStatus, problem) {
	if node.reason == "" || failure.reason != "" || st.Backend != infrav1alpha1.BackendPod ||
		(st.Phase != infrav1alpha1.VMPending && st.Phase != infrav1alpha1.VMScheduling && st.Phase != infrav1alpha1.VMStarting) {
		return st, failure
	}
	st.Message = node.message
	if !node.waiting {
		st.Phase = infrav1alpha1.VMFailed
	}
	st.Status = string(st.Phase)
	return st, node.problem
}

// stoppedVMStatus is the status of a VM the operator stopped: Stopping until the launcher has
// ended (the guest powers off within its grace period), then Stopped, saying why; Degraded
// after failed starts, not after an idle stop.
func stoppedVMStatus(vm *infrav1alpha1.VirtualMachine, st infrav1alpha1.VirtualMachineStatus, pods []corev1.Pod) (infrav1alpha1.VirtualMachineStatus, problem) {
	st.Restarts, _ = podProblems(pods)
	st.Phase, st.Message, st.StoppedReason = infrav1alpha1.VMStopped, vm.Status.Message, vm.Status.StoppedReason
	st.FailedStarts = vm.Status.FailedStarts
	if slices.ContainsFunc(pods, func(p corev1.Pod) bool {
		return p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
	}) {
		st.Phase = infrav1alpha1.VMStopping
	}
	if st.StoppedReason == infrav1alpha1.StoppedStartFailed {
		return st, problem{reason: infrav1alpha1.ReasonStartFailed, message: st.Message}
	}
	return st, problem{}
}

// vmFailedStarts counts the launcher's failed exits in a start in progress (one that has not
// reached Running since it began) and stops the VM at maxFailedStarts (0: never). An exit
// counts when it failed: a guest that powers off during its boot (exit 0) is no failure, and
// under runStrategy Always it is the guest's own reboot.
func vmFailedStarts(vm *infrav1alpha1.VirtualMachine, st infrav1alpha1.VirtualMachineStatus, pods []corev1.Pod, failure problem, maxFailedStarts int) (infrav1alpha1.VirtualMachineStatus, problem) {
	if !vmStarting(st.Phase) {
		return st, failure
	}
	var failed int32 // failed starts before this status: none when this start, or this spec, is new
	if vmStarting(vm.Status.Phase) && vm.Status.ObservedGeneration == vm.Generation {
		failed = vm.Status.FailedStarts
	}
	st.FailedStarts = failed
	last := lastFailure(pods)
	if last != "" {
		// Exits since the status last written; a new pod's restarts count from zero.
		since := vm.Status.Restarts
		if st.Restarts < since {
			since = 0
		}
		st.FailedStarts += st.Restarts - since
	}
	if maxFailedStarts <= 0 || int(st.FailedStarts) < maxFailedStarts {
		return st, failure
	}
	st.Phase, st.Status, st.StoppedReason = infrav1alpha1.VMStopping, string(infrav1alpha1.VMStopping), infrav1alpha1.StoppedStartFailed
	st.Message = fmt.Sprintf("stopped after %d failed starts; %s: %s", st.FailedStarts, vmKept(vm.Spec), cmp.Or(failure.message, last, st.Message))
	return st, problem{reason: infrav1alpha1.ReasonStartFailed, message: st.Message}
}

// vmStarting reports whether a VM in phase p is on its way to Running.
func vmStarting(p infrav1alpha1.VirtualMachinePhase) bool {
	switch p {
	case infrav1alpha1.VMPending, infrav1alpha1.VMScheduling, infrav1alpha1.VMStarting, infrav1alpha1.VMFailed:
		return true
	}
	return false
}

// lastFailure describes the failed last exit of a live pod's container that has not since
// completed (an init container that failed once and then succeeded is no failure): its pod,
// image, exit code and last words. Empty when no such container is.
func lastFailure(pods []corev1.Pod) string {
	for _, p := range livePods(pods) {
		for _, cs := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
			t := cs.LastTerminationState.Terminated
			if t == nil || t.ExitCode == 0 || (cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0) {
				continue
			}
			msg := fmt.Sprintf("pod %s: container %s (image %q) exited %d (%s)", p.Name, cs.Name, cs.Image, t.ExitCode, t.Reason)
			if t.Message != "" {
				msg += ": " + clip(t.Message)
			}
			return msg
		}
	}
	return ""
}

// podPhase reads the launcher pod: the run strategy is the kubelet's restart policy, so a pod
// that has ended is a guest that stays stopped (Succeeded: powered off) or failed.
func podPhase(spec infrav1alpha1.VirtualMachineSpec, pods []corev1.Pod) (infrav1alpha1.VirtualMachinePhase, string) {
	if len(pods) == 0 {
		if spec.RunStrategy == infrav1alpha1.RunHalted {
			return infrav1alpha1.VMStopped, "halted; " + vmKept(spec)
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

// vmKept says what a stopped VM keeps, as its status and events tell the user: no more than the
// chart keeps (an Ephemeral root disk is the container disk's copy, gone with the pod).
func vmKept(spec infrav1alpha1.VirtualMachineSpec) string {
	if spec.RootDisk.Persistence == infrav1alpha1.RootDiskEphemeral {
		return "the data disk is kept (the Ephemeral root disk starts afresh)"
	}
	return "the root and data disks are kept"
}
