package controllers

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/activity"
)

// TestVMIdleStatus: a running VM is warned of, then stopped for, being unused for its idle
// timeout; one whose launcher was not read lately, or that is not running, never is.
func TestVMIdleStatus(t *testing.T) {
	started := metav1.NewTime(t0.Add(-2 * time.Hour))
	running := infrav1alpha1.VirtualMachineStatus{Phase: infrav1alpha1.VMRunning, Status: "Running", StartedAt: &started}
	warned := running
	warned.IdleStopAt = &started
	pol := func(lastUse, readAgo time.Duration) idlePolicy {
		return idlePolicy{timeout: 30 * time.Minute, warning: 5 * time.Minute,
			use: activity.Use{Last: t0.Add(-lastUse), Read: t0.Add(-readAgo)}}
	}
	for _, tc := range []struct {
		name    string
		st      infrav1alpha1.VirtualMachineStatus
		pol     idlePolicy
		phase   infrav1alpha1.VirtualMachinePhase
		stopped string
		warned  bool
		msg     string
	}{
		{name: "an SSH session open (used now)", st: running, pol: pol(0, time.Second), phase: infrav1alpha1.VMRunning, warned: false},
		{name: "in the warning", st: running, pol: pol(27*time.Minute, time.Second), phase: infrav1alpha1.VMRunning, warned: true,
			msg: "root and data disks are kept"},
		{name: "unused for the timeout, warned before", st: warned, pol: pol(31*time.Minute, time.Second), phase: infrav1alpha1.VMStopping,
			stopped: infrav1alpha1.StoppedIdle, warned: false, msg: "stopped after 30m0s unused; the root and data disks are kept"},
		{name: "unused for the timeout, never warned: warned first", st: running, pol: pol(31*time.Minute, time.Second),
			phase: infrav1alpha1.VMRunning, warned: true, msg: "stops at"},
		{name: "in the warning, an SSH session opened since the last reading", st: running, pol: pol(27*time.Minute, 3*time.Minute),
			phase: infrav1alpha1.VMRunning, warned: false},
		{name: "use unknown: the launcher not read lately", st: running, pol: pol(31*time.Minute, 5*time.Minute),
			phase: infrav1alpha1.VMRunning, warned: false},
		{name: "still booting", st: infrav1alpha1.VirtualMachineStatus{Phase: infrav1alpha1.VMStarting, Status: "Starting"},
			pol: pol(31*time.Minute, time.Second), phase: infrav1alpha1.VMStarting, warned: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vm := &infrav1alpha1.VirtualMachine{Status: tc.st}
			st := tc.st
			st.IdleStopAt = nil
			st = vmIdleStatus(vm, st, tc.pol, t0)
			if st.Phase != tc.phase || st.Status != string(tc.phase) || st.StoppedReason != tc.stopped || (st.IdleStopAt != nil) != tc.warned || !strings.Contains(st.Message, tc.msg) {
				t.Errorf("%s (%s), stopped %q, idleStopAt %v, %q; want %s, %q, warned %v, saying %q", st.Phase, st.Status, st.StoppedReason, st.IdleStopAt, st.Message, tc.phase, tc.stopped, tc.warned, tc.msg)
			}
		})
	}
}

// TestAVMStoppedByTheOperatorStaysStoppedUntilItsSpecChanges: the stop halts the guest (the
// chart renders no launcher), the status keeps saying why, and a change to the spec (raising
// startRequests) runs it again, the reason cleared.
func TestAVMStoppedByTheOperatorStaysStoppedUntilItsSpecChanges(t *testing.T) {
	vm := &infrav1alpha1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Generation: 3},
		Spec:       infrav1alpha1.VirtualMachineSpec{RunStrategy: infrav1alpha1.RunAlways},
		Status: infrav1alpha1.VirtualMachineStatus{ObservedGeneration: 3, Backend: infrav1alpha1.BackendPod, Phase: infrav1alpha1.VMStopping,
			StoppedReason: infrav1alpha1.StoppedIdle, Message: "stopped after 30m0s unused; the root and data disks are kept"},
	}
	if got := runStrategy(vm); got != infrav1alpha1.RunHalted {
		t.Errorf("rendered with run strategy %s, want Halted", got)
	}
	for _, tc := range []struct {
		name string
		pods []corev1.Pod
		want infrav1alpha1.VirtualMachinePhase
	}{
		{name: "the launcher powering the guest off", pods: []corev1.Pod{vmPod(corev1.PodRunning, "n1", true, true)},
			want: infrav1alpha1.VMStopping},
		{name: "the launcher gone", want: infrav1alpha1.VMStopped},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, failure := vmStatus(vm, true, nil, tc.pods, 0, t0)
			if st.Phase != tc.want || st.StoppedReason != infrav1alpha1.StoppedIdle || st.Message != vm.Status.Message || failure != (problem{}) {
				t.Errorf("%s, stopped %q, %q, failure %+v; want %s, Idle, the stop's message, no failure", st.Phase, st.StoppedReason, st.Message, failure, tc.want)
			}
		})
	}
	vm.Generation, vm.Spec.StartRequests = 4, 1
	if got := runStrategy(vm); got != infrav1alpha1.RunAlways {
		t.Errorf("after a start request: run strategy %s, want Always", got)
	}
	if st, _ := vmStatus(vm, true, nil, nil, 0, t0); st.StoppedReason != "" || st.Phase != infrav1alpha1.VMPending {
		t.Errorf("after a start request: %s, stopped %q; want Pending, no reason", st.Phase, st.StoppedReason)
	}
}

// TestVMStartedAtIsKeptWhileRunning: the idle time counts from the guest's start, which a later
// status keeps rather than moving to the pod's newest readiness.
func TestVMStartedAtIsKeptWhileRunning(t *testing.T) {
	pod := vmPod(corev1.PodRunning, "n1", true, false)
	pod.Status.Conditions[0].LastTransitionTime = metav1.NewTime(t0.Add(-time.Minute))
	vm := &infrav1alpha1.VirtualMachine{Spec: infrav1alpha1.VirtualMachineSpec{RunStrategy: infrav1alpha1.RunAlways}}
	st, _ := vmStatus(vm, true, nil, []corev1.Pod{pod}, 0, t0)
	if st.StartedAt == nil || !st.StartedAt.Equal(ptr.To(metav1.NewTime(t0.Add(-time.Minute)))) {
		t.Fatalf("startedAt %v, want the pod's readiness %s", st.StartedAt, t0.Add(-time.Minute))
	}
	earlier := metav1.NewTime(t0.Add(-time.Hour))
	vm.Status = infrav1alpha1.VirtualMachineStatus{Phase: infrav1alpha1.VMRunning, StartedAt: &earlier}
	if st, _ := vmStatus(vm, true, nil, []corev1.Pod{pod}, 0, t0); !st.StartedAt.Equal(&earlier) {
		t.Errorf("startedAt %v, want the running VM's %s kept", st.StartedAt, earlier)
	}
}

// TestTheActivityEndpointIsRenderedOnlyWhereAnIdleStopApplies: a VM without an idle timeout,
// on KubeVirt, or under an operator without an activity record renders as before (no launcher
// replaced on upgrade); the port steps past a TCP port the guest forwards itself.
func TestTheActivityEndpointIsRenderedOnlyWhereAnIdleStopOrAHibernationApplies(t *testing.T) {
	cfg := goldenVMConfig()
	idle := &metav1.Duration{Duration: time.Hour}
	// Its launcher tells the operator whether a start resumed the saved state.
	hibernating := infrav1alpha1.VirtualMachineSpec{StopAction: infrav1alpha1.StopHibernate,
		RootDisk: infrav1alpha1.VMRootDisk{Persistence: infrav1alpha1.RootDiskPersistent}}
	for _, tc := range []struct {
		name   string
		cfg    func(VMConfig) VMConfig
		spec   infrav1alpha1.VirtualMachineSpec
		status infrav1alpha1.VirtualMachineStatus
		port   int64 // 0: none rendered
	}{
		{name: "no idle timeout", spec: infrav1alpha1.VirtualMachineSpec{}, port: 0},
		{name: "its own idle timeout", spec: infrav1alpha1.VirtualMachineSpec{IdleTimeout: idle}, port: vmActivityPort},
		{name: "the operator's idle timeout", cfg: func(c VMConfig) VMConfig { c.IdleTimeout = time.Hour; return c },
			spec: infrav1alpha1.VirtualMachineSpec{}, port: vmActivityPort},
		{name: "on KubeVirt", spec: infrav1alpha1.VirtualMachineSpec{IdleTimeout: idle, Backend: infrav1alpha1.BackendKubeVirt}, port: 0},
		{name: "hibernating, without an idle timeout", spec: hibernating, port: vmActivityPort},
		{name: "hibernating, no activity record", cfg: func(c VMConfig) VMConfig { c.Activity = nil; return c }, spec: hibernating, port: 0},
		{name: "no longer hibernating, once did", status: infrav1alpha1.VirtualMachineStatus{
			Hibernation: &infrav1alpha1.VMHibernation{State: infrav1alpha1.HibernationSaved}}, port: vmActivityPort},
		{name: "an Ephemeral root disk cannot hibernate", spec: infrav1alpha1.VirtualMachineSpec{StopAction: infrav1alpha1.StopHibernate,
			RootDisk: infrav1alpha1.VMRootDisk{Persistence: infrav1alpha1.RootDiskEphemeral}}, port: 0},
		{name: "no activity record", cfg: func(c VMConfig) VMConfig { c.Activity = nil; return c },
			spec: infrav1alpha1.VirtualMachineSpec{IdleTimeout: idle}, port: 0},
		{name: "the guest forwards 9922 and 9923 over TCP",
			spec: infrav1alpha1.VirtualMachineSpec{IdleTimeout: idle, Ports: []infrav1alpha1.VMPort{
				{Name: "a", Port: vmActivityPort, Protocol: "TCP"}, {Name: "b", Port: vmActivityPort + 1}, {Name: "c", Port: vmActivityPort + 2, Protocol: "UDP"}}},
			port: vmActivityPort + 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := cfg
			if tc.cfg != nil {
				c = tc.cfg(c)
			}
			vm := &infrav1alpha1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{UID: "u1"}, Spec: tc.spec, Status: tc.status}
			got, err := c.activityValues(vm)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.port == 0 && got != nil:
				t.Errorf("rendered %v, want no activity endpoint", got)
			case tc.port != 0 && (got == nil || got["port"] != tc.port || got["token"] == "" || !strings.Contains(got["pem"].(string), "BEGIN CERTIFICATE")):
				t.Errorf("rendered %v, want port %d with a token and a PEM", got, tc.port)
			}
		})
	}
}

// failingLauncher is a launcher pod not ready, its container restarted restarts times, last
// ending with exit.
func failingLauncher(restarts, exit int32) corev1.Pod {
	p := vmPod(corev1.PodRunning, "n1", false, false)
	p.Name = "vm-launcher"
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "launcher", Image: "launcher", RestartCount: restarts,
		State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exit, Reason: "Error"}}}}
	if exit == 0 {
		p.Status.ContainerStatuses[0].State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	}
	return p
}

// TestVMFailedStarts: the launcher's failed exits in a start are counted and stop the VM at the
// operator's limit, its disk kept, Degraded with the last failure; a guest's own power-off
// (exit 0) is no failure, and a start after Running counts afresh.
func TestVMFailedStarts(t *testing.T) {
	for _, tc := range []struct {
		name       string
		prev       infrav1alpha1.VirtualMachineStatus
		pod        corev1.Pod
		max        int
		want       int32
		stopped    bool
		wantReason string
	}{
		{name: "a first failure", prev: infrav1alpha1.VirtualMachineStatus{Phase: infrav1alpha1.VMStarting}, pod: failingLauncher(1, 1),
			max: 3, want: 1, stopped: false, wantReason: infrav1alpha1.ReasonCrashLoop},
		{name: "the third failure stops it",
			prev: infrav1alpha1.VirtualMachineStatus{Phase: infrav1alpha1.VMFailed, Restarts: 2, FailedStarts: 2},
			pod:  failingLauncher(3, 1), max: 3, want: 3, stopped: true, wantReason: infrav1alpha1.ReasonStartFailed},
		{name: "no limit", prev: infrav1alpha1.VirtualMachineStatus{Phase: infrav1alpha1.VMFailed, Restarts: 2, FailedStarts: 2},
			pod: failingLauncher(3, 1), max: 0, want: 3, stopped: false, wantReason: infrav1alpha1.ReasonCrashLoop},
		{name: "the guest powered off while booting",
			prev: infrav1alpha1.VirtualMachineStatus{Phase: infrav1alpha1.VMStarting, Restarts: 2, FailedStarts: 2},
			pod:  failingLauncher(3, 0), max: 3, want: 2, stopped: false},
		{name: "crashed after running: a new start",
			prev: infrav1alpha1.VirtualMachineStatus{Phase: infrav1alpha1.VMRunning, Restarts: 4, FailedStarts: 0},
			pod:  failingLauncher(5, 1), max: 3, want: 1, stopped: false, wantReason: infrav1alpha1.ReasonCrashLoop},
		{name: "a new pod counts from zero",
			prev: infrav1alpha1.VirtualMachineStatus{Phase: infrav1alpha1.VMFailed, Restarts: 5, FailedStarts: 2},
			pod:  failingLauncher(1, 1), max: 3, want: 3, stopped: true, wantReason: infrav1alpha1.ReasonStartFailed},
		{name: "restarted after its failure, booting again",
			prev: infrav1alpha1.VirtualMachineStatus{Phase: infrav1alpha1.VMStarting, Restarts: 2, FailedStarts: 2},
			pod:  booting(failingLauncher(3, 1)), max: 3, want: 3, stopped: true, wantReason: infrav1alpha1.ReasonStartFailed},
		{name: "an init container that failed once, then completed",
			prev: infrav1alpha1.VirtualMachineStatus{Phase: infrav1alpha1.VMStarting, Restarts: 1, FailedStarts: 1},
			pod:  initFailedOnce(failingLauncher(1, 0)), max: 3, want: 1, stopped: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vm := &infrav1alpha1.VirtualMachine{Spec: infrav1alpha1.VirtualMachineSpec{RunStrategy: infrav1alpha1.RunAlways},
				Status: tc.prev}
			vm.Status.Backend = infrav1alpha1.BackendPod
			st, failure := vmStatus(vm, true, nil, []corev1.Pod{tc.pod}, tc.max, t0)
			if st.FailedStarts != tc.want || (st.StoppedReason == infrav1alpha1.StoppedStartFailed) != tc.stopped || failure.reason != tc.wantReason {
				t.Errorf("failedStarts %d, stopped %q, failure %+v; want %d, stopped %v, reason %q", st.FailedStarts, st.StoppedReason, failure, tc.want, tc.stopped, tc.wantReason)
			}
			if tc.stopped && (st.Phase != infrav1alpha1.VMStopping || !strings.Contains(st.Message, "stopped after 3 failed starts; the root and data disks are kept: ") || !strings.Contains(st.Message, "exit")) {
				t.Errorf("stopped: %s, %q; want Stopping, saying why and the last failure", st.Phase, st.Message)
			}
		})
	}
}

// booting is p with its launcher running again after its last exit.
func booting(p corev1.Pod) corev1.Pod {
	p.Status.ContainerStatuses[0].State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	p.Status.ContainerStatuses[0].LastTerminationState.Terminated.Message = "vm-launcher: error: VM_CPU_MODEL=host needs VM_ACCEL=kvm"
	return p
}

// initFailedOnce is p with an init container that failed once, then completed.
func initFailedOnce(p corev1.Pod) corev1.Pod {
	p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "boot-disk", RestartCount: 1,
		State:                corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1}}}}
	return p
}

// TestAChangedSpecStartsCountingAfresh: a fix to a failing VM's spec is a new start.
func TestAChangedSpecStartsCountingAfresh(t *testing.T) {
	vm := &infrav1alpha1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Generation: 2}, Spec: infrav1alpha1.VirtualMachineSpec{RunStrategy: infrav1alpha1.RunAlways},
		Status: infrav1alpha1.VirtualMachineStatus{ObservedGeneration: 1, Backend: infrav1alpha1.BackendPod, Phase: infrav1alpha1.VMFailed, Restarts: 2, FailedStarts: 2}}
	st, _ := vmStatus(vm, true, nil, []corev1.Pod{failingLauncher(3, 1)}, 3, t0)
	if st.FailedStarts != 1 || st.StoppedReason != "" {
		t.Errorf("failedStarts %d, stopped %q; want 1, not stopped", st.FailedStarts, st.StoppedReason)
	}
}

// TestALateWarningComesBeforeTheNextReading: a VM whose activity reading came only after its
// stop time (the readings are 30 s apart, the warning 30 s of a 1 m timeout) is warned, not
// stopped at the next look a moment later on the same reading (the warning's own status write
// brings one), and is stopped once a reading taken after the warning still shows no use.
func TestALateWarningComesBeforeTheNextReading(t *testing.T) {
	started := metav1.NewTime(t0.Add(-time.Hour))
	vm := &infrav1alpha1.VirtualMachine{Status: infrav1alpha1.VirtualMachineStatus{Phase: infrav1alpha1.VMRunning, StartedAt: &started}}
	lastUse := t0.Add(-time.Minute - time.Second)
	look := func(now, read time.Time) infrav1alpha1.VirtualMachineStatus {
		p := idlePolicy{timeout: time.Minute, warning: 30 * time.Second, interval: 30 * time.Second,
			use: activity.Use{Last: lastUse, Read: read}}
		st := vm.Status
		st.IdleStopAt = nil
		return vmIdleStatus(vm, st, p, now)
	}

	st := look(t0, t0)
	if st.IdleStopAt == nil || !st.IdleStopAt.After(t0) || st.Phase != infrav1alpha1.VMRunning {
		t.Fatalf("read a second past its stop time: %s, idle stop %v (%s); want Running, warned of a stop after this reading", st.Phase, st.IdleStopAt, st.Message)
	}
	vm.Status = st
	if st := look(t0.Add(2*time.Second), t0); st.Phase != infrav1alpha1.VMRunning || st.IdleStopAt == nil {
		t.Fatalf("a look after its warning, no reading since: %s, idle stop %v (%s); want Running, still warned", st.Phase, st.IdleStopAt, st.Message)
	}
	if st := look(t0.Add(30*time.Second), t0.Add(30*time.Second)); st.Phase != infrav1alpha1.VMStopping || st.StoppedReason != infrav1alpha1.StoppedIdle {
		t.Fatalf("the next reading, still unused: %s, stopped %q (%s); want Stopping, Idle", st.Phase, st.StoppedReason, st.Message)
	}
}
