package controllers

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
)

// HibernationRecord holds what each VM's launcher last reported of its hibernation until the
// VM's status records it: the launcher's last words on a stop (read from its pod as the watch
// delivers it: the kubelet deletes the pod right after) and its account of a start (read with
// its activity). A report is kept under the VM's namespace and name with its UID, so that a pod
// made to look like another VM's launcher reports for no VM of another namespace, nor for a
// later VM of the same name.
type HibernationRecord struct {
	mu   sync.Mutex
	seen map[types.NamespacedName]hibernationReport
}

type hibernationReport struct {
	uid    types.UID
	report infrav1alpha1.VMHibernation
}

// NewHibernationRecord is an empty record.
func NewHibernationRecord() *HibernationRecord {
	return &HibernationRecord{seen: map[types.NamespacedName]hibernationReport{}}
}

// report keeps h as the latest report of the VM vm with uid, unless a later one is kept.
func (r *HibernationRecord) report(vm types.NamespacedName, uid types.UID, h infrav1alpha1.VMHibernation) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if old, ok := r.seen[vm]; ok && old.uid == uid && !h.Time.After(old.report.Time.Time) {
		return
	}
	r.seen[vm] = hibernationReport{uid: uid, report: h}
}

// of is the latest report of vm not yet recorded in its status; nil when none is.
func (r *HibernationRecord) of(vm *infrav1alpha1.VirtualMachine) *infrav1alpha1.VMHibernation {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	got, ok := r.seen[client.ObjectKeyFromObject(vm)]
	if !ok || got.uid != vm.UID {
		return nil
	}
	return &got.report
}

// recorded forgets vm's report once its stored status holds it (or a later one).
func (r *HibernationRecord) recorded(vm *infrav1alpha1.VirtualMachine) {
	if r == nil || vm.Status.Hibernation == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	key := client.ObjectKeyFromObject(vm)
	if got, ok := r.seen[key]; ok && (got.uid != vm.UID || !got.report.Time.After(vm.Status.Hibernation.Time.Time)) {
		delete(r.seen, key)
	}
}

// PodChanged records the last words of a VM's launcher on its hibernation, as each version of
// its pod is delivered.
func (l VirtualMachineLifecycle) PodChanged(obj client.Object) {
	pod, ok := asPod(obj)
	if !ok {
		return
	}
	owner := metav1.GetControllerOf(pod)
	if owner == nil || owner.Kind != vmGVK.Kind || pod.Name != owner.Name+"-launcher" {
		return
	}
	if h, ok := launcherHibernation(pod); ok {
		l.Hibernations.report(types.NamespacedName{Namespace: pod.Namespace, Name: owner.Name}, owner.UID, h)
	}
}

// asPod is the pod obj, as the watch delivers it (typed or unstructured).
func asPod(obj client.Object) (*corev1.Pod, bool) {
	switch o := obj.(type) {
	case *corev1.Pod:
		return o, true
	case *unstructured.Unstructured:
		pod := &corev1.Pod{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, pod); err != nil {
			return nil, false
		}
		return pod, true
	}
	return nil, false
}

// The launcher's last words on a stop with VM_HIBERNATE=1 (images/vm-launcher: save_state,
// hibernate_failed): the state saved, and its size; or why it was not.
var (
	hibernatedWords    = regexp.MustCompile(`^vm-launcher: hibernated: the guest's state \(([0-9]{1,9}) MiB\)`)
	notHibernatedWords = "vm-launcher: not hibernated: "
)

// launcherHibernation reads what the launcher container of pod said of its hibernation when it
// ended; false when it ended otherwise, or has not.
func launcherHibernation(pod *corev1.Pod) (infrav1alpha1.VMHibernation, bool) {
	for _, cs := range pod.Status.ContainerStatuses {
		t := cs.State.Terminated
		if cs.Name != "launcher" || t == nil {
			continue
		}
		words := strings.TrimSpace(t.Message)
		if m := hibernatedWords.FindStringSubmatch(words); m != nil {
			mib, _ := strconv.ParseInt(m[1], 10, 64)
			return infrav1alpha1.VMHibernation{State: infrav1alpha1.HibernationSaved,
				Size: resource.NewQuantity(mib<<20, resource.BinarySI), Time: t.FinishedAt}, true
		}
		if reason, ok := strings.CutPrefix(words, notHibernatedWords); ok {
			reason, _, _ = strings.Cut(reason, "\n")
			return infrav1alpha1.VMHibernation{State: infrav1alpha1.HibernationFailed, Reason: clip(reason), Time: t.FinishedAt}, true
		}
	}
	return infrav1alpha1.VMHibernation{}, false
}

// startReport is what the launcher's activity answer, read at, says of the saved state its
// start found: resumed (its size), or discarded (why); false when it found none. Every reading
// of the same start says the same (sameAccount).
func (a launcherActivity) startReport(at time.Time) (infrav1alpha1.VMHibernation, bool) {
	switch {
	case a.ResumedMiB != nil && *a.ResumedMiB >= 0 && *a.ResumedMiB < 1<<30:
		return infrav1alpha1.VMHibernation{State: infrav1alpha1.HibernationResumed,
			Size: resource.NewQuantity(*a.ResumedMiB<<20, resource.BinarySI), Time: metav1.NewTime(at)}, true
	case a.Discarded != "":
		return infrav1alpha1.VMHibernation{State: infrav1alpha1.HibernationDiscarded, Reason: clip(a.Discarded), Time: metav1.NewTime(at)}, true
	}
	return infrav1alpha1.VMHibernation{}, false
}

// vmHibernationStatus is st with what is known of the VM's hibernation: the status's own,
// unless its launcher reported something later and new; and a Stopped VM's message saying that
// its state waits for the next start. A stop's report is dated by the launcher's end; a start's
// by each reading of it, so the same account read again is the same start, not another.
func vmHibernationStatus(vm *infrav1alpha1.VirtualMachine, st infrav1alpha1.VirtualMachineStatus, reported *infrav1alpha1.VMHibernation) infrav1alpha1.VirtualMachineStatus {
	st.Hibernation = vm.Status.Hibernation
	if reported != nil && (st.Hibernation == nil || (reported.Time.After(st.Hibernation.Time.Time) && !sameAccount(*reported, *st.Hibernation))) {
		st.Hibernation = reported
	}
	if h := st.Hibernation; h != nil && h.State == infrav1alpha1.HibernationSaved && st.Phase == infrav1alpha1.VMStopped {
		st.Message = joinClauses(st.Message, fmt.Sprintf("the guest's state (%s) is saved, and a start resumes it", h.Size))
	}
	return st
}

// sameAccount reports whether a and b say the same of a start: both Resumed, the same size, or
// both Discarded, for the same reason. A state saved (or not) is always a new account.
func sameAccount(a, b infrav1alpha1.VMHibernation) bool {
	if a.State != b.State || (a.State != infrav1alpha1.HibernationResumed && a.State != infrav1alpha1.HibernationDiscarded) {
		return false
	}
	sizeA, sizeB := ptr.Deref(a.Size, resource.Quantity{}), ptr.Deref(b.Size, resource.Quantity{})
	return a.Reason == b.Reason && sizeA.Cmp(sizeB) == 0
}

// hibernationNotice is the event that tells of a hibernation report the status records now
// for the first time.
func hibernationNotice(before, now *infrav1alpha1.VMHibernation) (string, bool) {
	if now == nil || (before != nil && !now.Time.After(before.Time.Time)) {
		return "", false
	}
	switch now.State {
	case infrav1alpha1.HibernationSaved:
		return fmt.Sprintf("hibernated: the guest's state (%s) is saved on the root disk's volume", now.Size), true
	case infrav1alpha1.HibernationResumed:
		return fmt.Sprintf("resumed the guest from its saved state (%s)", now.Size), true
	case infrav1alpha1.HibernationDiscarded:
		return "discarded the saved state (" + now.Reason + "): the guest booted cold", true
	default:
		return "could not hibernate (" + now.Reason + "): the guest was powered off", true
	}
}

// joinClauses joins a status message and a clause after it.
func joinClauses(message, clause string) string {
	if message == "" {
		return clause
	}
	return message + "; " + clause
}

// untilStartReport is when to look again at a VM whose status st still says Saved while it
// runs: its launcher's account of the start (read every activity interval, which triggers no
// reconcile) is awaited. 0 when none is.
func (c VMConfig) untilStartReport(vm *infrav1alpha1.VirtualMachine, st infrav1alpha1.VirtualMachineStatus) time.Duration {
	if st.Phase != infrav1alpha1.VMRunning || st.Hibernation == nil || st.Hibernation.State != infrav1alpha1.HibernationSaved || !c.servesActivity(vm) {
		return 0
	}
	return activityInterval(c.ActivityInterval)
}

// resumeExpected reports whether a start of vm is to resume a saved state.
func resumeExpected(vm *infrav1alpha1.VirtualMachine) bool {
	return vm.Status.Hibernation != nil && vm.Status.Hibernation.State == infrav1alpha1.HibernationSaved
}
