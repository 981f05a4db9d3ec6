package controllers

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/activity"
)

// TestIdleStatus: a running IDE is warned of, then stopped for, being unused for its idle
// timeout, counted from its last use or its start; one whose use is unknown (not read lately)
// never is.
func TestIdleStatus(t *testing.T) {
	started := metav1.NewTime(t0.Add(-2 * time.Hour))
	running := infrav1alpha1.WorkspaceStatus{Phase: infrav1alpha1.WorkspaceRunning, StartedAt: &started}
	pol := func(lastUse time.Duration, readAgo time.Duration) idlePolicy {
		return idlePolicy{timeout: 30 * time.Minute, warning: 5 * time.Minute,
			use: activity.Use{Last: t0.Add(-lastUse), Read: t0.Add(-readAgo)}}
	}
	for _, tc := range []struct {
		name      string
		pol       idlePolicy
		wasWarned bool
		phase     infrav1alpha1.WorkspacePhase
		stopped   string
		warned    bool
		msg       string
		next      time.Duration
	}{
		{name: "used a minute ago", pol: pol(time.Minute, time.Second), wasWarned: false, phase: infrav1alpha1.WorkspaceRunning,
			warned: false, next: 24 * time.Minute},
		{name: "in the warning", pol: pol(27*time.Minute, time.Second), wasWarned: false, phase: infrav1alpha1.WorkspaceRunning,
			warned: true, msg: "stops at", next: 30 * time.Second},
		{name: "in the warning, last read before it", pol: pol(27*time.Minute, 3*time.Minute), wasWarned: false,
			phase: infrav1alpha1.WorkspaceRunning, warned: false, next: 30 * time.Second},
		{name: "unused for the timeout", pol: pol(31*time.Minute, time.Second), wasWarned: true, phase: infrav1alpha1.WorkspaceStopping,
			stopped: infrav1alpha1.StoppedIdle, warned: false, msg: "stopped after 30m0s unused", next: 0},
		{name: "unused for the timeout, never warned: warned first", pol: pol(31*time.Minute, time.Second), wasWarned: false,
			phase: infrav1alpha1.WorkspaceRunning, warned: true, msg: "stops at", next: 30 * time.Second},
		{name: "never used since its start", pol: pol(1000*time.Hour, time.Second), wasWarned: true, phase: infrav1alpha1.WorkspaceStopping,
			stopped: infrav1alpha1.StoppedIdle, warned: false, msg: "storage is kept", next: 0},
		{name: "stop time passed, no reading since", pol: pol(30*time.Minute+30*time.Second, time.Minute), wasWarned: true,
			phase: infrav1alpha1.WorkspaceRunning, warned: true, msg: "stops at", next: 30 * time.Second},
		{name: "use unknown: not read lately", pol: pol(31*time.Minute, 5*time.Minute), wasWarned: true,
			phase: infrav1alpha1.WorkspaceRunning, warned: false, next: 30 * time.Second},
		{name: "no timeout", pol: idlePolicy{use: activity.Use{Read: t0}}, wasWarned: false, phase: infrav1alpha1.WorkspaceRunning,
			warned: false, next: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := testWorkspace(true, running)
			if tc.wasWarned {
				ws.Status.IdleStopAt = &started
			}
			st := idleStatus(ws, running, tc.pol, t0)
			if st.Phase != tc.phase || st.StoppedReason != tc.stopped || (st.IdleStopAt != nil) != tc.warned || !strings.Contains(st.Message, tc.msg) {
				t.Errorf("%s, stopped %q, idleStopAt %v, %q; want %s, %q, warned %v, saying %q", st.Phase, st.StoppedReason, st.IdleStopAt, st.Message, tc.phase, tc.stopped, tc.warned, tc.msg)
			}
			if got := tc.pol.untilCheck(st.Phase == infrav1alpha1.WorkspaceRunning, ws.Spec.IdleTimeout, st.StartedAt, t0); got != tc.next {
				t.Errorf("next look in %s, want %s", got, tc.next)
			}
		})
	}
}

// TestAnIdleStopIsNoFailure: a workspace stopped for being unused is Stopped, not Degraded,
// and starts again on a change to its spec.
func TestAnIdleStopIsNoFailure(t *testing.T) {
	ws := testWorkspace(true, infrav1alpha1.WorkspaceStatus{Phase: infrav1alpha1.WorkspaceStopping, StoppedReason: infrav1alpha1.StoppedIdle,
		Message: "stopped after 30m0s unused; the storage is kept"})
	ws.Generation, ws.Status.ObservedGeneration = 1, 1
	st, failure := workspaceStatus(ws, nil, policy{}, t0)
	if st.Phase != infrav1alpha1.WorkspaceStopped || st.StoppedReason != infrav1alpha1.StoppedIdle || failure != (problem{}) {
		t.Errorf("%s, stopped %q, failing %+v; want Stopped, Idle, no failure", st.Phase, st.StoppedReason, failure)
	}
}
