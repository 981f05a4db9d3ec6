package controllers

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/engine"
)

// readyIDE is an IDE pod created at 0 s, scheduled at 2 s and ready at 12 s.
func readyIDE(base time.Time) *corev1.Pod {
	at := func(s int) metav1.Time { return metav1.NewTime(base.Add(time.Duration(s) * time.Second)) }
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "ide", CreationTimestamp: at(0)}, Spec: corev1.PodSpec{NodeName: "node-1"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: at(2)},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: at(12)},
		}}}
}

func TestStartPhases(t *testing.T) {
	base := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)
	asked := ptr.To(metav1.NewTime(base.Add(-3 * time.Second)))
	notScheduled := readyIDE(base)
	notScheduled.Status.Conditions = notScheduled.Status.Conditions[1:]
	cases := []struct {
		name      string
		requested *metav1.Time
		pod       *corev1.Pod
		want      map[string]time.Duration
	}{
		{name: "every phase", requested: asked, pod: readyIDE(base), want: map[string]time.Duration{
			StartPhaseTotal: 15 * time.Second, StartPhaseOperator: 3 * time.Second,
			StartPhaseScheduling: 2 * time.Second, StartPhaseContainers: 10 * time.Second}},
		{name: "a start no status recorded", pod: readyIDE(base), want: map[string]time.Duration{
			StartPhaseScheduling: 2 * time.Second, StartPhaseContainers: 10 * time.Second}},
		{name: "a pod without its scheduled condition", requested: asked, pod: notScheduled, want: map[string]time.Duration{
			StartPhaseTotal: 15 * time.Second, StartPhaseOperator: 3 * time.Second}},
		{name: "a pod made before the start (a clock ahead)", requested: ptr.To(metav1.NewTime(base.Add(time.Second))), pod: readyIDE(base),
			want: map[string]time.Duration{
				StartPhaseTotal: 11 * time.Second, StartPhaseOperator: 0,
				StartPhaseScheduling: 2 * time.Second, StartPhaseContainers: 10 * time.Second}},
		{name: "no pod", requested: asked},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := startPhases(tc.requested, tc.pod)
			if len(got) != len(tc.want) {
				t.Fatalf("%v, want %v", got, tc.want)
			}
			for phase, d := range tc.want {
				if got[phase] != d {
					t.Errorf("%s took %s, want %s", phase, got[phase], d)
				}
			}
		})
	}
}

// TestWorkspaceTransitionsCountOnce: a start ending and a stop by the operator are
// observed when their status is written; a status that repeats them observes nothing.
func TestWorkspaceTransitionsCountOnce(t *testing.T) {
	base := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)
	starting := &infrav1alpha1.Workspace{Status: infrav1alpha1.WorkspaceStatus{Phase: infrav1alpha1.WorkspaceStarting,
		StartRequestedAt: ptr.To(metav1.NewTime(base.Add(-3 * time.Second)))}}
	running := infrav1alpha1.WorkspaceStatus{Phase: infrav1alpha1.WorkspaceRunning}
	totals := func() (uint64, float64) {
		m := &dto.Metric{}
		if err := startSeconds.WithLabelValues("Workspace", StartPhaseTotal).(prometheus.Metric).Write(m); err != nil {
			t.Fatal(err)
		}
		return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
	}
	count, sum := totals()
	workspaceTransitions(starting, running, []corev1.Pod{*readyIDE(base)})()
	if gotCount, gotSum := totals(); gotCount != count+1 || gotSum != sum+15 {
		t.Errorf("a start of 15 s that made the IDE ready: %d total samples of %v s, want %d of %v", gotCount, gotSum, count+1, sum+15)
	}
	// Readiness lost and regained on the pod that ran before: no start of a new pod.
	flapped := starting.DeepCopy()
	flapped.Status.StartRequestedAt = ptr.To(metav1.NewTime(base.Add(time.Hour)))
	if f := workspaceTransitions(flapped, running, []corev1.Pod{*readyIDE(base)}); f != nil {
		t.Error("a pod older than the start was observed as the start's")
	}
	already := &infrav1alpha1.Workspace{Status: running}
	if f := workspaceTransitions(already, running, []corev1.Pod{*readyIDE(base)}); f != nil {
		t.Error("a workspace still Running observed a start again")
	}

	idle := testutil.ToFloat64(operatorStops.WithLabelValues("Workspace", infrav1alpha1.StoppedIdle))
	stopped := infrav1alpha1.WorkspaceStatus{Phase: infrav1alpha1.WorkspaceStopping, StoppedReason: infrav1alpha1.StoppedIdle}
	workspaceTransitions(&infrav1alpha1.Workspace{Status: running}, stopped, nil)()
	if got := testutil.ToFloat64(operatorStops.WithLabelValues("Workspace", infrav1alpha1.StoppedIdle)); got != idle+1 {
		t.Errorf("an idle stop: %v stops, want %v", got, idle+1)
	}
	// Once written, the workspace is stopped by the operator: its next statuses repeat the reason.
	repeated := &infrav1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Generation: 1},
		Status: infrav1alpha1.WorkspaceStatus{ObservedGeneration: 1, StoppedReason: infrav1alpha1.StoppedIdle}}
	if f := workspaceTransitions(repeated, stopped, nil); f != nil {
		t.Error("a workspace already stopped by the operator counted its stop again")
	}
}

// TestAStartRecordedLateIsObserved: a start whose status was first written after its pod
// was made, or only once the IDE was ready (the engine's first status of a generation waits for
// the children), is observed: a new workspace's from its creation, a restart's from when its
// status recorded it.
func TestAStartRecordedLateIsObserved(t *testing.T) {
	base := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)
	running := infrav1alpha1.WorkspaceStatus{Phase: infrav1alpha1.WorkspaceRunning}
	pending := infrav1alpha1.WorkspaceStatus{Phase: infrav1alpha1.WorkspacePending, StartRequestedAt: ptr.To(metav1.NewTime(base.Add(6 * time.Second)))}
	for _, tc := range []struct {
		name    string
		created time.Time
		before  infrav1alpha1.WorkspaceStatus
		total   float64
	}{
		{"a new workspace", base.Add(-time.Second), pending, 13},
		{"a new workspace whose first status is Running", base.Add(-time.Second), infrav1alpha1.WorkspaceStatus{}, 13},
		{"a restart", base.Add(-time.Hour), pending, 6},
	} {
		ws := &infrav1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(tc.created)}, Status: tc.before}
		m := &dto.Metric{}
		read := func() (uint64, float64) {
			if err := startSeconds.WithLabelValues("Workspace", StartPhaseTotal).(prometheus.Metric).Write(m); err != nil {
				t.Fatal(err)
			}
			return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
		}
		count, sum := read()
		observe := workspaceTransitions(ws, running, []corev1.Pod{*readyIDE(base)})
		if observe == nil {
			t.Errorf("%s: the start was not observed", tc.name)
			continue
		}
		observe()
		if gotCount, gotSum := read(); gotCount != count+1 || gotSum-sum != tc.total {
			t.Errorf("%s: %d samples adding %v s, want 1 of %v s", tc.name, gotCount-count, gotSum-sum, tc.total)
		}
	}
}

// TestStartAndStopSeriesExistFromTheStart: every kind's start phases and stop reasons have a
// series before anything is observed, so that Prometheus sees the first one as an increase.
func TestStartAndStopSeriesExistFromTheStart(t *testing.T) {
	if n := testutil.CollectAndCount(startSeconds); n != 7 {
		t.Errorf("%d start series, want 7 (Workspace: 4 phases; VirtualMachine: 3)", n)
	}
	if n := testutil.CollectAndCount(operatorStops); n != 4 {
		t.Errorf("%d stop series, want 4 (2 kinds, Idle and StartFailed)", n)
	}
}

// TestAVMStartIsObservedWhenItsLauncherIsReady: a VM whose launcher pod has just become ready
// observes its scheduling and containers phases once; one already Running observes nothing.
func TestAVMStartIsObservedWhenItsLauncherIsReady(t *testing.T) {
	base := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)
	pod, err := runtime.DefaultUnstructuredConverter.ToUnstructured(readyIDE(base))
	if err != nil {
		t.Fatal(err)
	}
	vm := func(phase infrav1alpha1.VirtualMachinePhase) *unstructured.Unstructured {
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&infrav1alpha1.VirtualMachine{
			TypeMeta:   metav1.TypeMeta{APIVersion: infrav1alpha1.GroupVersion.String(), Kind: "VirtualMachine"},
			ObjectMeta: metav1.ObjectMeta{Name: "vm", Namespace: "vms"},
			Status:     infrav1alpha1.VirtualMachineStatus{Phase: phase, Backend: infrav1alpha1.BackendPod}})
		if err != nil {
			t.Fatal(err)
		}
		return &unstructured.Unstructured{Object: u}
	}
	observed := engine.Observed{Pods: []*unstructured.Unstructured{{Object: pod}}}
	containers := func() uint64 {
		m := &dto.Metric{}
		if err := startSeconds.WithLabelValues("VirtualMachine", StartPhaseContainers).(prometheus.Metric).Write(m); err != nil {
			t.Fatal(err)
		}
		return m.GetHistogram().GetSampleCount()
	}
	before := containers()
	res, err := VirtualMachineLifecycle{VMConfig: DefaultConfig().VM}.Status(vm(infrav1alpha1.VMPending), observed)
	if err != nil || res.Written == nil {
		t.Fatalf("a VM whose launcher became ready: %v, observes %v", err, res.Written != nil)
	}
	res.Written()
	if got := containers(); got != before+1 {
		t.Errorf("%d VM container phases observed, want 1", got-before)
	}
	if res, _ := (VirtualMachineLifecycle{VMConfig: DefaultConfig().VM}).Status(vm(infrav1alpha1.VMRunning), observed); res.Written != nil {
		t.Error("a VM already Running observed a start again")
	}
	// Not Ready since after its launcher pod was made: that pod's readiness came back.
	flapped := vm(infrav1alpha1.VMStarting)
	conds := []any{map[string]any{"type": infrav1alpha1.ConditionReady, "status": "False", "reason": "Progressing", "message": "",
		"lastTransitionTime": base.Add(time.Hour).Format(time.RFC3339)}}
	if err := unstructured.SetNestedSlice(flapped.Object, conds, "status", "conditions"); err != nil {
		t.Fatal(err)
	}
	if res, _ := (VirtualMachineLifecycle{VMConfig: DefaultConfig().VM}).Status(flapped, observed); res.Written != nil {
		t.Error("a VM whose launcher pod is older than its start observed the start")
	}
}
