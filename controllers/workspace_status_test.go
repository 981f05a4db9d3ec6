package controllers

import (
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/engine"
	"github.com/cloudspace-dev/cloudspace-operator/internal/workspace"
)

var t0 = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

func testWorkspace(running bool, prev infrav1alpha1.WorkspaceStatus) *infrav1alpha1.Workspace {
	return &infrav1alpha1.Workspace{
		ObjectMeta: metav1.ObjectMeta{Name: "alice-go", Namespace: "ides"},
		Spec: infrav1alpha1.WorkspaceSpec{Owner: "alice", Running: ptr.To(running), Port: 8080,
			StartTimeout: &metav1.Duration{Duration: 2 * time.Minute}},
		Status: prev,
	}
}

func pod(node string, phase corev1.PodPhase, ready bool, waiting string) corev1.Pod {
	p := corev1.Pod{Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: phase, PodIP: "10.0.0.7"}}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.NewTime(t0.Add(-time.Minute))}}
	if waiting != "" {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "ide", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: waiting}}}}
	}
	return p
}

func TestWorkspacePhases(t *testing.T) {
	started := metav1.NewTime(t0.Add(-30 * time.Second))
	long := metav1.NewTime(t0.Add(-3 * time.Minute))
	deleting := pod("n1", corev1.PodRunning, true, "")
	deleting.DeletionTimestamp = &started
	cases := []struct {
		name    string
		ws      *infrav1alpha1.Workspace
		pods    []corev1.Pod
		phase   infrav1alpha1.WorkspacePhase
		msg     string
		node    string
		requeue bool
		awaited bool
		reason  string // the Degraded reason; none when empty
	}{
		{name: "new: no pod yet", ws: testWorkspace(true, infrav1alpha1.WorkspaceStatus{}), phase: infrav1alpha1.WorkspacePending,
			msg: "created", requeue: true, awaited: false},
		{name: "unscheduled", ws: testWorkspace(true, infrav1alpha1.WorkspaceStatus{}),
			pods: []corev1.Pod{pod("", corev1.PodPending, false, "")}, phase: infrav1alpha1.WorkspacePending, msg: "scheduled",
			requeue: true, awaited: false},
		{name: "pulling",
			ws:   testWorkspace(true, infrav1alpha1.WorkspaceStatus{Phase: infrav1alpha1.WorkspaceStarting, StartRequestedAt: &started}),
			pods: []corev1.Pod{pod("n1", corev1.PodPending, false, "ContainerCreating")}, phase: infrav1alpha1.WorkspaceStarting,
			msg: "ContainerCreating", requeue: true, awaited: false},
		{name: "ready",
			ws:   testWorkspace(true, infrav1alpha1.WorkspaceStatus{Phase: infrav1alpha1.WorkspaceStarting, StartRequestedAt: &started}),
			pods: []corev1.Pod{pod("n1", corev1.PodRunning, true, "")}, phase: infrav1alpha1.WorkspaceRunning, node: "n1", requeue: false,
			awaited: true},
		{name: "start timed out",
			ws:   testWorkspace(true, infrav1alpha1.WorkspaceStatus{Phase: infrav1alpha1.WorkspaceStarting, StartRequestedAt: &long}),
			pods: []corev1.Pod{pod("n1", corev1.PodPending, false, "ContainerCreating")}, phase: infrav1alpha1.WorkspaceFailed,
			msg: "within 2m0s: ide: ContainerCreating", requeue: false, awaited: true, reason: infrav1alpha1.ReasonStartTimedOut},
		{name: "image cannot be pulled: failed at once",
			ws:   testWorkspace(true, infrav1alpha1.WorkspaceStatus{Phase: infrav1alpha1.WorkspaceStarting, StartRequestedAt: &started}),
			pods: []corev1.Pod{pod("n1", corev1.PodPending, false, "ImagePullBackOff")}, phase: infrav1alpha1.WorkspaceFailed,
			msg: "container ide", requeue: false, awaited: true, reason: infrav1alpha1.ReasonImagePullFailed},
		{name: "crash loop: failed at once",
			ws:   testWorkspace(true, infrav1alpha1.WorkspaceStatus{Phase: infrav1alpha1.WorkspaceStarting, StartRequestedAt: &started}),
			pods: []corev1.Pod{crashing(1)}, phase: infrav1alpha1.WorkspaceFailed, msg: "last exit 9 (Error): node: bad option",
			requeue: false, awaited: true, reason: infrav1alpha1.ReasonCrashLoop},
		{name: "failed recovers when ready",
			ws:   testWorkspace(true, infrav1alpha1.WorkspaceStatus{Phase: infrav1alpha1.WorkspaceFailed, StartRequestedAt: &long}),
			pods: []corev1.Pod{pod("n1", corev1.PodRunning, true, "")}, phase: infrav1alpha1.WorkspaceRunning, node: "n1", requeue: false,
			awaited: true},
		{name: "stopping", ws: testWorkspace(false, infrav1alpha1.WorkspaceStatus{Phase: infrav1alpha1.WorkspaceRunning}),
			pods: []corev1.Pod{pod("n1", corev1.PodRunning, true, "")}, phase: infrav1alpha1.WorkspaceStopping, msg: "exit", requeue: false,
			awaited: false},
		{name: "stopped", ws: testWorkspace(false, infrav1alpha1.WorkspaceStatus{Phase: infrav1alpha1.WorkspaceStopping}),
			pods: []corev1.Pod{deleting}, phase: infrav1alpha1.WorkspaceStopped, msg: "storage is kept", requeue: false, awaited: false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st, failure := workspaceStatus(tc.ws, tc.pods, policy{maxFailedStarts: DefaultMaxFailedStarts}, t0)
			if st.Phase != tc.phase || !strings.Contains(st.Message, tc.msg) || st.NodeName != tc.node {
				t.Errorf("status = %s %q on %q, want %s containing %q on %q", st.Phase, st.Message, st.NodeName, tc.phase, tc.msg, tc.node)
			}
			if failure.reason != tc.reason || (failure.reason != "" && failure.message != st.Message) {
				t.Errorf("failing %+v, want reason %q with the status message %q", failure, tc.reason, st.Message)
			}
			if got := untilTimeout(tc.ws, st, t0) > 0; got != tc.requeue {
				t.Errorf("requeue for the timeout = %v, want %v", got, tc.requeue)
			}
			if got := awaited(st.Phase); got != tc.awaited {
				t.Errorf("written at once (Prompt) = %v, want %v", got, tc.awaited)
			}
			if st.Port != 8080 || st.URL != "http://alice-go.ides.svc:8080/" {
				t.Errorf("port %d url %s", st.Port, st.URL)
			}
		})
	}
}

func TestWorkspaceStartTimeoutCountsFromTheStart(t *testing.T) {
	ws := testWorkspace(true, infrav1alpha1.WorkspaceStatus{Phase: infrav1alpha1.WorkspaceStopped})
	st, _ := workspaceStatus(ws, nil, policy{}, t0)
	if st.StartRequestedAt == nil || !st.StartRequestedAt.Time.Equal(t0) {
		t.Fatalf("startRequestedAt = %v, want now when a stopped workspace starts", st.StartRequestedAt)
	}
	if d := untilTimeout(ws, st, t0.Add(90*time.Second)); d != 30*time.Second {
		t.Errorf("90s into a 2m timeout: requeue after %s, want 30s", d)
	}
	ws.Status = st
	later, _ := workspaceStatus(ws, nil, policy{}, t0.Add(90*time.Second))
	if !later.StartRequestedAt.Time.Equal(t0) {
		t.Errorf("the start time moved to %v while still starting", later.StartRequestedAt)
	}
}

// crashing is an IDE pod whose container exited restarts times and waits to be started again.
func crashing(restarts int32) corev1.Pod {
	p := pod("n1", corev1.PodRunning, false, "CrashLoopBackOff")
	p.Name = "alice-go-ide-1"
	cs := &p.Status.ContainerStatuses[0]
	cs.Image, cs.RestartCount = "ide:1", restarts
	cs.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 9, Reason: "Error", Message: "node: bad option: --no-such-option"}
	return p
}

// TestFailedStartsStopTheWorkspace: at the limit of failed starts the workspace is stopped, its
// storage kept, until its spec changes; below it, or with no limit, it goes on failing.
func TestFailedStartsStopTheWorkspace(t *testing.T) {
	started := metav1.NewTime(t0.Add(-30 * time.Second))
	ws := testWorkspace(true, infrav1alpha1.WorkspaceStatus{Phase: infrav1alpha1.WorkspaceFailed, StartRequestedAt: &started})
	ws.Generation, ws.Status.ObservedGeneration = 2, 2
	if st, _ := workspaceStatus(ws, []corev1.Pod{crashing(2)}, policy{maxFailedStarts: 3}, t0); st.Phase != infrav1alpha1.WorkspaceFailed || st.StoppedReason != "" || st.FailedStarts != 2 {
		t.Errorf("2 failed starts of 3: %s, stopped %q, failed starts %d; want Failed, not stopped, 2", st.Phase, st.StoppedReason, st.FailedStarts)
	}
	if st, _ := workspaceStatus(ws, []corev1.Pod{crashing(30)}, policy{maxFailedStarts: 0}, t0); st.StoppedReason != "" {
		t.Errorf("no limit: stopped %q", st.StoppedReason)
	}
	// An IDE that ran, exiting 5 times over its life and becoming ready again each time, and
	// now exits once more: one failed start, not six.
	ran := testWorkspace(true, infrav1alpha1.WorkspaceStatus{Phase: infrav1alpha1.WorkspaceRunning, Restarts: 5})
	if st, _ := workspaceStatus(ran, []corev1.Pod{crashing(6)}, policy{maxFailedStarts: 3}, t0); st.FailedStarts != 1 || st.StoppedReason != "" || st.Restarts != 6 {
		t.Errorf("a running IDE that exits: failed starts %d, restarts %d, stopped %q; want 1, 6, not stopped", st.FailedStarts, st.Restarts, st.StoppedReason)
	}
	st, failure := workspaceStatus(ws, []corev1.Pod{crashing(3)}, policy{maxFailedStarts: 3}, t0)
	if st.Phase != infrav1alpha1.WorkspaceStopping || st.StoppedReason != infrav1alpha1.ReasonStartFailed || failure.reason != infrav1alpha1.ReasonStartFailed {
		t.Fatalf("3 failed starts of 3: %s, stopped %q, failing %+v; want Stopping, StartFailed", st.Phase, st.StoppedReason, failure)
	}
	if !strings.Contains(st.Message, "after 3 failed starts") || !strings.Contains(st.Message, "node: bad option") {
		t.Errorf("message %q does not say how often and what failed", st.Message)
	}
	if ws.Runs() != true {
		t.Fatal("a workspace runs until the status that stops it is written")
	}
	ws.Status, ws.Status.ObservedGeneration = st, ws.Generation // as the engine writes it
	if ws.Runs() {
		t.Error("the stopped workspace still runs: its next render would start the IDE again")
	}
	gone, failure := workspaceStatus(ws, nil, policy{maxFailedStarts: 3}, t0.Add(time.Minute))
	if gone.Phase != infrav1alpha1.WorkspaceStopped || gone.StoppedReason != infrav1alpha1.ReasonStartFailed || failure.reason != infrav1alpha1.ReasonStartFailed || gone.Message != st.Message {
		t.Errorf("once the pod is gone: %s %q, stopped %q, failing %+v; want Stopped, the same message, StartFailed", gone.Phase, gone.Message, gone.StoppedReason, failure)
	}
	ws.Status, ws.Status.ObservedGeneration, ws.Generation = gone, 2, 3 // a change to the spec: Start, or a fixed image
	if !ws.Runs() {
		t.Fatal("a changed spec does not start the workspace again")
	}
	again, failure := workspaceStatus(ws, nil, policy{maxFailedStarts: 3}, t0.Add(2*time.Minute))
	if again.Phase != infrav1alpha1.WorkspacePending || again.StoppedReason != "" || failure.reason != "" || !again.StartRequestedAt.Time.Equal(t0.Add(2*time.Minute)) {
		t.Errorf("started again: %s, stopped %q, failing %+v, start at %v; want Pending from now", again.Phase, again.StoppedReason, failure, again.StartRequestedAt)
	}
}

func TestWorkspaceValuesAndRetain(t *testing.T) {
	ws := testWorkspace(false, infrav1alpha1.WorkspaceStatus{})
	ws.Spec.Ingress = &infrav1alpha1.WorkspaceIngress{Host: "alice.ide.example.com"}
	ws.Spec.Storage.ReclaimPolicy = infrav1alpha1.ReclaimRetain
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ws)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: obj}
	vals, err := WorkspaceLifecycle{WorkspaceConfig: goldenWorkspaceConfig}.Values(u)
	if err != nil {
		t.Fatal(err)
	}
	if vals["running"] != false || vals["image"] != workspace.DefaultImage || vals["port"] != int64(8080) {
		t.Errorf("values = %v", vals)
	}
	if size, _, _ := unstructured.NestedString(vals, "storage", "size"); size != "10Gi" {
		t.Errorf("storage size = %q, want the 10Gi default", size)
	}
	pvc := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "PersistentVolumeClaim"}}
	dep := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment"}}
	keep, err := WorkspaceLifecycle{}.Retain(u, []*unstructured.Unstructured{dep, pvc})
	if err != nil || len(keep) != 1 || keep[0] != pvc {
		t.Errorf("Retain keeps %v, want the PVC only", keep)
	}
	ws.Spec.Storage.ReclaimPolicy = infrav1alpha1.ReclaimDelete
	obj, _ = runtime.DefaultUnstructuredConverter.ToUnstructured(ws)
	if keep, _ := (WorkspaceLifecycle{}).Retain(&unstructured.Unstructured{Object: obj}, []*unstructured.Unstructured{pvc}); len(keep) != 0 {
		t.Errorf("Delete keeps %v", keep)
	}
	if workspaceURL(ws) != "https://alice.ide.example.com/" {
		t.Errorf("url = %s", workspaceURL(ws))
	}
}

// TestWorkspaceIDEImageMirror: a mirror of the default IDE image (OLM's related image) runs in
// its place, in workspaces that name the default or none; an image of the user's own is kept.
func TestWorkspaceIDEImageMirror(t *testing.T) {
	const mirror = "mirror.example/code-server@sha256:0123"
	for _, tc := range []struct{ name, spec, mirror, want string }{
		{name: "no mirror", want: workspace.DefaultImage},
		{name: "no image named", mirror: mirror, want: mirror},
		{name: "the default named", spec: workspace.DefaultImage, mirror: mirror, want: mirror},
		{name: "the user's own", spec: "example/my-ide:1", mirror: mirror, want: "example/my-ide:1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := WorkspaceLifecycle{WorkspaceConfig: WorkspaceConfig{IDEImage: tc.mirror}}
			if got := l.image(tc.spec); got != tc.want {
				t.Errorf("spec.image %q with mirror %q: %q, want %q", tc.spec, tc.mirror, got, tc.want)
			}
		})
	}
}

func TestWorkspaceAdoptsOnlyItsOwnersVolume(t *testing.T) {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(testWorkspace(true, infrav1alpha1.WorkspaceStatus{}))
	if err != nil {
		t.Fatal(err)
	}
	ws := &unstructured.Unstructured{Object: obj}
	cases := []struct {
		name   string
		labels map[string]string
		ok     bool
	}{
		{name: "same owner", labels: map[string]string{workspace.OwnerLabel: "alice"}, ok: true},
		{name: "another user's", labels: map[string]string{workspace.OwnerLabel: "bob"}, ok: false},
		{name: "no owner label", ok: false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pvc := &metav1.ObjectMeta{Name: "alice-go-home", Labels: tc.labels}
			err := (WorkspaceLifecycle{}).Adopt(ws, pvc)
			var refusal *engine.Refusal
			switch {
			case tc.ok && err != nil:
				t.Errorf("Adopt = %v, want nil", err)
			case !tc.ok && (!errors.As(err, &refusal) || refusal.Reason != infrav1alpha1.ReasonVolumeOwnedByAnotherUser):
				t.Errorf("Adopt = %v, want a %s refusal", err, infrav1alpha1.ReasonVolumeOwnedByAnotherUser)
			case !tc.ok && strings.Contains(err.Error(), "bob"):
				t.Errorf("the refusal %q names the volume's owner", err)
			}
		})
	}
}
