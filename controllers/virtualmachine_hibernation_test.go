package controllers

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
)

// endedLauncher is the launcher pod of VM name (uid) in ns, its launcher container ended at
// at with message as its last words.
func endedLauncher(ns, name string, uid types.UID, message string, at time.Time) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-launcher", OwnerReferences: []metav1.OwnerReference{
			{APIVersion: vmGVK.GroupVersion().String(), Kind: vmGVK.Kind, Name: name, UID: uid, Controller: ptr.To(true)}}},
		Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "launcher",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Message: message, FinishedAt: metav1.NewTime(at)}}}}},
	}
}

// TestLauncherLastWordsOnHibernation: the launcher's termination message on a stop says
// whether the guest's state was saved, and how big it is, or why not; anything else is no
// hibernation.
func TestLauncherLastWordsOnHibernation(t *testing.T) {
	at := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name, message string
		want          *infrav1alpha1.VMHibernation
	}{
		{"saved", "vm-launcher: hibernated: the guest's state (286 MiB) is saved; the next start resumes it\n",
			&infrav1alpha1.VMHibernation{State: infrav1alpha1.HibernationSaved, Size: ptr.To(resource.MustParse("286Mi"))}},
		{"not saved", "vm-launcher: not hibernated: no room for the state: 12 MiB free on the root disk's volume, the guest's memory is 1024 MiB\n",
			&infrav1alpha1.VMHibernation{State: infrav1alpha1.HibernationFailed, Reason: "no room for the state: 12 MiB free on the root disk's volume, the guest's memory is 1024 MiB"}},
		{"a crash", "vm-launcher: QEMU exited with status 1 (the guest's console, kubectl logs --previous, says why)", nil},
		{"a size too large to be true", "vm-launcher: hibernated: the guest's state (99999999999 MiB) is saved", nil},
		{"the guest's words, not the launcher's", "[  OK  ] hibernated: the guest's state (1 MiB)", nil},
		{"no message", "", nil},
	} {
		got, ok := launcherHibernation(endedLauncher("ns", "vm", "uid-1", tc.message, at))
		switch {
		case tc.want == nil && ok:
			t.Errorf("%s: read as %+v, want no hibernation", tc.name, got)
		case tc.want == nil:
		case !ok:
			t.Errorf("%s: not read, want %+v", tc.name, *tc.want)
		case got.State != tc.want.State || got.Reason != tc.want.Reason || !got.Time.Time.Equal(at) ||
			(tc.want.Size != nil && (got.Size == nil || got.Size.Cmp(*tc.want.Size) != 0)):
			t.Errorf("%s: %+v (size %v), want %+v at %s", tc.name, got, got.Size, *tc.want, at)
		}
	}
	running := endedLauncher("ns", "vm", "uid-1", "", at)
	running.Status.ContainerStatuses[0].State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	if got, ok := launcherHibernation(running); ok {
		t.Errorf("a running launcher read as %+v", got)
	}
}

// TestAHibernationReportReachesOnlyItsVM: a pod that claims to be another tenant's VM's
// launcher (another namespace, or an earlier VM of the same name) reports nothing for it; the
// VM's own launcher does, once, until its status records it.
func TestAHibernationReportReachesOnlyItsVM(t *testing.T) {
	at := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	saved := "vm-launcher: hibernated: the guest's state (300 MiB) is saved; the next start resumes it"
	l := VirtualMachineLifecycle{VMConfig: VMConfig{Hibernations: NewHibernationRecord()}}
	bob := &infrav1alpha1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "bob", Name: "vm", UID: "bob-uid"}}

	l.PodChanged(endedLauncher("alice", "vm", "bob-uid", saved, at))
	l.PodChanged(endedLauncher("bob", "vm", "earlier-uid", saved, at))
	forged := endedLauncher("bob", "vm", "bob-uid", saved, at)
	forged.Name = "not-the-launcher"
	l.PodChanged(forged)
	if got := l.Hibernations.of(bob); got != nil {
		t.Fatalf("bob's VM has the report %+v of a pod that is not its launcher", *got)
	}

	l.PodChanged(endedLauncher("bob", "vm", "bob-uid", saved, at))
	got := l.Hibernations.of(bob)
	if got == nil || got.State != infrav1alpha1.HibernationSaved {
		t.Fatalf("bob's launcher's last words: %+v, want Saved", got)
	}
	// An earlier version of the pod, delivered with the update, does not replace it.
	l.PodChanged(endedLauncher("bob", "vm", "bob-uid", "vm-launcher: not hibernated: QEMU did not start saving it", at.Add(-time.Minute)))
	if got := l.Hibernations.of(bob); got.State != infrav1alpha1.HibernationSaved {
		t.Errorf("an earlier report replaced the latest: %+v", *got)
	}
	bob.Status.Hibernation = got
	l.Hibernations.recorded(bob)
	if got := l.Hibernations.of(bob); got != nil {
		t.Errorf("the report is kept after the status recorded it: %+v", *got)
	}
}

// TestVMHibernationStatus: the status keeps what it recorded until the launcher reports
// something later, and a Stopped VM with a saved state says a start resumes it.
func TestVMHibernationStatus(t *testing.T) {
	at := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	saved := &infrav1alpha1.VMHibernation{State: infrav1alpha1.HibernationSaved, Size: ptr.To(resource.MustParse("286Mi")), Time: metav1.NewTime(at)}
	resumed := &infrav1alpha1.VMHibernation{State: infrav1alpha1.HibernationResumed, Size: ptr.To(resource.MustParse("286Mi")), Time: metav1.NewTime(at.Add(time.Hour))}
	stopped := infrav1alpha1.VirtualMachineStatus{Phase: infrav1alpha1.VMStopped, Message: "stopped after 1m0s unused; the root and data disks are kept"}
	for _, tc := range []struct {
		name             string
		stored, reported *infrav1alpha1.VMHibernation
		st               infrav1alpha1.VirtualMachineStatus
		want             *infrav1alpha1.VMHibernation
		message          string
	}{
		{"nothing known", nil, nil, stopped, nil, stopped.Message},
		{"saved, reported", nil, saved, stopped, saved, stopped.Message + "; the guest's state (286Mi) is saved, and a start resumes it"},
		{"saved, recorded", saved, nil, stopped, saved, stopped.Message + "; the guest's state (286Mi) is saved, and a start resumes it"},
		{"resumed", saved, resumed, infrav1alpha1.VirtualMachineStatus{Phase: infrav1alpha1.VMRunning}, resumed, ""},
		{"an earlier report", resumed, saved, infrav1alpha1.VirtualMachineStatus{Phase: infrav1alpha1.VMRunning}, resumed, ""},
		// The same launcher's account, read again later.
		{"the same resume, read again", resumed, &infrav1alpha1.VMHibernation{State: infrav1alpha1.HibernationResumed,
			Size: ptr.To(resource.MustParse("286Mi")), Time: metav1.NewTime(at.Add(2 * time.Hour))},
			infrav1alpha1.VirtualMachineStatus{Phase: infrav1alpha1.VMRunning}, resumed, ""},
	} {
		vm := &infrav1alpha1.VirtualMachine{Status: infrav1alpha1.VirtualMachineStatus{Hibernation: tc.stored}}
		got := vmHibernationStatus(vm, tc.st, tc.reported)
		if got.Hibernation != tc.want || got.Message != tc.message {
			t.Errorf("%s: %+v, %q; want %+v, %q", tc.name, got.Hibernation, got.Message, tc.want, tc.message)
		}
	}
	if msg, ok := hibernationNotice(saved, resumed); !ok || !strings.Contains(msg, "resumed") {
		t.Errorf("the resume's notice: %q, %v", msg, ok)
	}
	if _, ok := hibernationNotice(resumed, resumed); ok {
		t.Error("a report already recorded is told again")
	}
}

// TestTheLaunchersStartReport: the activity answer's account of a start's saved state, dated
// by its reading.
func TestTheLaunchersStartReport(t *testing.T) {
	read := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		answer launcherActivity
		want   infrav1alpha1.HibernationState
	}{
		{"resumed", launcherActivity{ResumedMiB: ptr.To[int64](286)}, infrav1alpha1.HibernationResumed},
		{"discarded", launcherActivity{Discarded: "the guest's CPUs and memory changed"}, infrav1alpha1.HibernationDiscarded},
		{"a cold boot without a state", launcherActivity{}, ""},
		{"a size no guest has", launcherActivity{ResumedMiB: ptr.To[int64](-1)}, ""},
	} {
		got, ok := tc.answer.startReport(read)
		if got.State != tc.want || ok != (tc.want != "") || (ok && !got.Time.Time.Equal(read)) {
			t.Errorf("%s: %+v, %v; want %q read at %s", tc.name, got, ok, tc.want, read)
		}
	}
}

// TestAResumeIsObservedAsSuch: a VM's start from a saved state is observed in the resume
// phase as well as the containers phase; a cold one is not.
func TestAResumeIsObservedAsSuch(t *testing.T) {
	base := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	m := &dto.Metric{}
	count := func() uint64 {
		if err := startSeconds.WithLabelValues(vmGVK.Kind, StartPhaseResume).(prometheus.Metric).Write(m); err != nil {
			t.Fatal(err)
		}
		return m.GetHistogram().GetSampleCount()
	}
	pod := readyIDE(base)
	running := infrav1alpha1.VirtualMachineStatus{Phase: infrav1alpha1.VMRunning, Backend: infrav1alpha1.BackendPod}
	for _, tc := range []struct {
		name  string
		state *infrav1alpha1.VMHibernation
		want  uint64
	}{
		{"cold", nil, 0},
		{"resumed", &infrav1alpha1.VMHibernation{State: infrav1alpha1.HibernationSaved}, 1},
		{"after a failed hibernation", &infrav1alpha1.VMHibernation{State: infrav1alpha1.HibernationFailed}, 0},
	} {
		vm := &infrav1alpha1.VirtualMachine{Status: infrav1alpha1.VirtualMachineStatus{Phase: infrav1alpha1.VMStarting, Hibernation: tc.state}}
		before := count()
		observe := vmTransitions(vm, running, []corev1.Pod{*pod})
		if observe == nil {
			t.Fatalf("%s: the start was not observed", tc.name)
		}
		observe()
		if got := count() - before; got != tc.want {
			t.Errorf("%s: %d resume samples, want %d", tc.name, got, tc.want)
		}
	}
}

// TestAStartsAccountIsAwaited: a running VM whose status still says Saved is looked at again
// after the activity interval, when its launcher's account of the start has been read (a
// reading triggers no reconcile); once the status has it, or where no launcher serves one, not.
func TestAStartsAccountIsAwaited(t *testing.T) {
	cfg := goldenVMConfig()
	cfg.ActivityInterval = 7 * time.Second
	saved := &infrav1alpha1.VMHibernation{State: infrav1alpha1.HibernationSaved}
	hibernating := infrav1alpha1.VirtualMachineSpec{StopAction: infrav1alpha1.StopHibernate,
		RootDisk: infrav1alpha1.VMRootDisk{Persistence: infrav1alpha1.RootDiskPersistent}}
	for _, tc := range []struct {
		name  string
		cfg   VMConfig
		phase infrav1alpha1.VirtualMachinePhase
		state *infrav1alpha1.VMHibernation
		want  time.Duration
	}{
		{"running, the resume's account awaited", cfg, infrav1alpha1.VMRunning, saved, 7 * time.Second},
		{"running, resumed", cfg, infrav1alpha1.VMRunning, &infrav1alpha1.VMHibernation{State: infrav1alpha1.HibernationResumed}, 0},
		{"stopped, saved", cfg, infrav1alpha1.VMStopped, saved, 0},
		{"no launcher serves it", VMConfig{}, infrav1alpha1.VMRunning, saved, 0},
	} {
		vm := &infrav1alpha1.VirtualMachine{Spec: hibernating, Status: infrav1alpha1.VirtualMachineStatus{Hibernation: tc.state}}
		st := infrav1alpha1.VirtualMachineStatus{Phase: tc.phase, Hibernation: tc.state}
		if got := tc.cfg.untilStartReport(vm, st); got != tc.want {
			t.Errorf("%s: look again after %s, want %s", tc.name, got, tc.want)
		}
	}
}
