package controllers

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/workspace"
)

func TestStoppedStatus(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) *metav1.Time { return ptr.To(metav1.NewTime(now.Add(-d))) }
	day := 24 * time.Hour
	stopped := func(at *metav1.Time) *infrav1alpha1.Workspace {
		return &infrav1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Generation: 2},
			Status: infrav1alpha1.WorkspaceStatus{ObservedGeneration: 2, Phase: infrav1alpha1.WorkspaceStopped, StoppedAt: at}}
	}
	changed := stopped(ago(40 * day))
	changed.Generation = 3
	opStopped := stopped(ago(40 * day))
	opStopped.Status.StoppedReason, opStopped.Status.Message = infrav1alpha1.StoppedIdle, "unused for 1h"
	cases := []struct {
		name                  string
		ws                    *infrav1alpha1.Workspace
		phase                 infrav1alpha1.WorkspacePhase
		pol                   stalePolicy
		stoppedAt, stale, del *metav1.Time
		message               string // a part of it
	}{
		{"just stopped", &infrav1alpha1.Workspace{Status: infrav1alpha1.WorkspaceStatus{Phase: infrav1alpha1.WorkspaceStopping}},
			infrav1alpha1.WorkspaceStopped, stalePolicy{after: 30 * day}, ago(0), nil, nil, "stopped"},
		{"still stopping", stopped(nil), infrav1alpha1.WorkspaceStopping, stalePolicy{after: 30 * day}, nil, nil, nil, "stopped"},
		{"stopped a while, not yet stale", stopped(ago(10 * day)), infrav1alpha1.WorkspaceStopped, stalePolicy{after: 30 * day},
			ago(10 * day), nil, nil, "stopped"},
		{"stale, never deleted", stopped(ago(40 * day)), infrav1alpha1.WorkspaceStopped, stalePolicy{after: 30 * day},
			ago(40 * day), ago(10 * day), nil, "start it, or delete it"},
		{"stale, to be deleted", stopped(ago(40 * day)), infrav1alpha1.WorkspaceStopped, stalePolicy{after: 30 * day, deleteAfter: 60 * day},
			ago(40 * day), ago(10 * day), ptr.To(metav1.NewTime(now.Add(20 * day))), "will be deleted at 2026-12-15T12:00:00Z"},
		{"a call 5 days ago", stopped(ago(40 * day)), infrav1alpha1.WorkspaceStopped,
			stalePolicy{after: 30 * day, use: workspace.Use{Last: now.Add(-5 * day)}}, ago(40 * day), nil, nil, "stopped"},
		{"a spec change not yet reconciled", changed, infrav1alpha1.WorkspaceStopped, stalePolicy{after: 30 * day},
			ago(40 * day), nil, nil, "stopped"},
		{"no stale policy", stopped(ago(400 * day)), infrav1alpha1.WorkspaceStopped, stalePolicy{}, ago(400 * day), nil, nil, "stopped"},
		{"stopped by the operator keeps its reason", opStopped, infrav1alpha1.WorkspaceStopped, stalePolicy{after: 30 * day},
			ago(40 * day), ago(10 * day), nil, "unused for 1h"},
	}
	for _, tc := range cases {
		in := infrav1alpha1.WorkspaceStatus{Phase: tc.phase, Message: "stopped; the storage is kept",
			StoppedReason: tc.ws.Status.StoppedReason}
		if in.StoppedReason != "" {
			in.Message = tc.ws.Status.Message
		}
		st := stoppedStatus(tc.ws, in, tc.pol, now)
		for _, f := range []struct {
			name      string
			got, want *metav1.Time
		}{{"stoppedAt", st.StoppedAt, tc.stoppedAt}, {"staleSince", st.StaleSince, tc.stale}, {"deleteAt", st.DeleteAt, tc.del}} {
			if (f.got == nil) != (f.want == nil) || (f.got != nil && !f.got.Equal(f.want)) {
				t.Errorf("%s: %s %v, want %v", tc.name, f.name, f.got, f.want)
			}
		}
		if !strings.Contains(st.Message, tc.message) {
			t.Errorf("%s: message %q, want it to say %q", tc.name, st.Message, tc.message)
		}
	}
}

func TestUntilStale(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	ws := &infrav1alpha1.Workspace{}
	st := infrav1alpha1.WorkspaceStatus{StoppedAt: ptr.To(metav1.NewTime(now.Add(-time.Hour)))}
	if got := untilStale(ws, st, stalePolicy{after: 3 * time.Hour}, now); got != 2*time.Hour {
		t.Errorf("stopped 1h of a 3h policy: look again in %s, want 2h", got)
	}
	st.StaleSince = ptr.To(metav1.NewTime(now))
	if got := untilStale(ws, st, stalePolicy{after: 3 * time.Hour}, now); got != 0 {
		t.Errorf("already stale: look again in %s, want never (the reaper deletes)", got)
	}
	if got := untilStale(ws, infrav1alpha1.WorkspaceStatus{}, stalePolicy{after: time.Hour}, now); got != 0 {
		t.Errorf("running: look again in %s, want never", got)
	}
}

func TestStaleSettingsAreChecked(t *testing.T) {
	for _, tc := range []struct {
		after, deleteAfter time.Duration
		ok                 bool
	}{{0, 0, true}, {time.Hour, 0, true}, {time.Hour, 2 * time.Hour, true},
		{time.Hour, time.Hour, false}, {0, time.Hour, false}, {-time.Hour, 0, false}} {
		err := WorkspaceConfig{StaleAfter: tc.after, DeleteStaleAfter: tc.deleteAfter}.validateStale()
		if (err == nil) != tc.ok {
			t.Errorf("stale after %s, delete after %s: %v, want ok %v", tc.after, tc.deleteAfter, err, tc.ok)
		}
	}
}

func TestDueForDeletion(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	due := func(mutate func(*infrav1alpha1.Workspace)) bool {
		ws := &infrav1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Generation: 1}, Status: infrav1alpha1.WorkspaceStatus{
			ObservedGeneration: 1, Phase: infrav1alpha1.WorkspaceStopped, DeleteAt: ptr.To(metav1.NewTime(now.Add(-time.Second)))}}
		mutate(ws)
		return dueForDeletion(ws, now)
	}
	if !due(func(*infrav1alpha1.Workspace) {}) {
		t.Error("a stopped workspace past its deleteAt is not due")
	}
	for name, mutate := range map[string]func(*infrav1alpha1.Workspace){
		"not yet":               func(ws *infrav1alpha1.Workspace) { ws.Status.DeleteAt = ptr.To(metav1.NewTime(now.Add(time.Minute))) },
		"changed since":         func(ws *infrav1alpha1.Workspace) { ws.Generation = 2 },
		"starting":              func(ws *infrav1alpha1.Workspace) { ws.Status.Phase = infrav1alpha1.WorkspaceStarting },
		"no deletion time":      func(ws *infrav1alpha1.Workspace) { ws.Status.DeleteAt = nil },
		"being deleted already": func(ws *infrav1alpha1.Workspace) { ws.DeletionTimestamp = ptr.To(metav1.NewTime(now)) },
	} {
		if due(mutate) {
			t.Errorf("%s: due for deletion", name)
		}
	}
}
