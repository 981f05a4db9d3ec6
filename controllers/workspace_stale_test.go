package controllers

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/activity"
)

func TestStoppedStatus(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) *metav1.Time { return ptr.To(metav1.NewTime(now.Add(-d))) }
	day := 24 * time.Hour
	in := func(d time.Duration) *metav1.Time { return ago(-d) }
	stopped := func(untouched, reported *metav1.Time) *infrav1alpha1.Workspace {
		return &infrav1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Generation: 2}, Status: infrav1alpha1.WorkspaceStatus{
			ObservedGeneration: 2, Phase: infrav1alpha1.WorkspaceStopped, UntouchedSince: untouched, StaleSince: reported}}
	}
	changed := stopped(ago(40*day), nil)
	changed.Generation = 3
	opStopped := stopped(ago(40*day), nil)
	opStopped.Status.StoppedReason, opStopped.Status.Message = infrav1alpha1.StoppedIdle, "unused for 1h"
	month, twoMonths := stalePolicy{after: 30 * day}, stalePolicy{after: 30 * day, deleteAfter: 60 * day}
	cases := []struct {
		name                  string
		ws                    *infrav1alpha1.Workspace
		phase                 infrav1alpha1.WorkspacePhase
		pol                   stalePolicy
		untouched, stale, del *metav1.Time
		message               string // a part of it
	}{
		{name: "just stopped", ws: &infrav1alpha1.Workspace{Status: infrav1alpha1.WorkspaceStatus{Phase: infrav1alpha1.WorkspaceStopping}},
			phase: infrav1alpha1.WorkspaceStopped, pol: month, untouched: ago(0), message: "stopped"},
		{name: "still stopping", ws: stopped(nil, nil), phase: infrav1alpha1.WorkspaceStopping, pol: month, message: "stopped"},
		{name: "untouched 10 days of 30", ws: stopped(ago(10*day), nil), phase: infrav1alpha1.WorkspaceStopped, pol: month,
			untouched: ago(10 * day), message: "stopped"},
		{name: "stale, reported now, never deleted", ws: stopped(ago(40*day), nil), phase: infrav1alpha1.WorkspaceStopped, pol: month,
			untouched: ago(40 * day), stale: ago(0), message: "start it, or delete it"},
		{name: "stale, reported 10 days ago", ws: stopped(ago(40*day), ago(10*day)), phase: infrav1alpha1.WorkspaceStopped, pol: month,
			untouched: ago(40 * day), stale: ago(10 * day), message: "stale"},
		{name: "to be deleted 60 days after the last touch", ws: stopped(ago(40*day), ago(10*day)), phase: infrav1alpha1.WorkspaceStopped,
			pol: twoMonths, untouched: ago(40 * day), stale: ago(10 * day), del: in(20 * day),
			message: "will be deleted at 2026-12-15T12:00:00Z"},
		{name: "reported only now: the whole notice from now", ws: stopped(ago(40*day), nil), phase: infrav1alpha1.WorkspaceStopped,
			pol: twoMonths, untouched: ago(40 * day), stale: ago(0), del: in(30 * day), message: "will be deleted at"},
		{name: "settings lowered under it: the gap's notice", ws: stopped(ago(40*day), nil), phase: infrav1alpha1.WorkspaceStopped,
			pol: stalePolicy{after: day, deleteAfter: 2 * day}, untouched: ago(40 * day), stale: ago(0), del: in(day),
			message: "will be deleted at"},
		{name: "a call 5 days ago", ws: stopped(ago(40*day), nil), phase: infrav1alpha1.WorkspaceStopped,
			pol: stalePolicy{after: 30 * day, use: activity.Use{Last: now.Add(-5 * day)}}, untouched: ago(5 * day), message: "stopped"},
		{name: "a call recorded before a restart that forgot it", ws: stopped(ago(5*day), nil), phase: infrav1alpha1.WorkspaceStopped,
			pol: month, untouched: ago(5 * day), message: "stopped"},
		{name: "a spec change not yet reconciled", ws: changed, phase: infrav1alpha1.WorkspaceStopped, pol: month, untouched: ago(0),
			message: "stopped"},
		{name: "no stale policy", ws: stopped(ago(400*day), nil), phase: infrav1alpha1.WorkspaceStopped, pol: stalePolicy{},
			untouched: ago(400 * day), message: "stopped"},
		{name: "stopped by the operator keeps its reason", ws: opStopped, phase: infrav1alpha1.WorkspaceStopped, pol: month,
			untouched: ago(40 * day), stale: ago(0), message: "unused for 1h"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := infrav1alpha1.WorkspaceStatus{Phase: tc.phase, Message: "stopped; the storage is kept", StoppedReason: tc.ws.Status.StoppedReason}
			if in.StoppedReason != "" {
				in.Message = tc.ws.Status.Message
			}
			st := stoppedStatus(tc.ws, in, tc.pol, now)
			for _, f := range []struct {
				name      string
				got, want *metav1.Time
			}{
				{name: "untouchedSince", got: st.UntouchedSince, want: tc.untouched},
				{name: "staleSince", got: st.StaleSince, want: tc.stale},
				{name: "deleteAt", got: st.DeleteAt, want: tc.del},
			} {
				if (f.got == nil) != (f.want == nil) || (f.got != nil && !f.got.Equal(f.want)) {
					t.Errorf("%s %v, want %v", f.name, f.got, f.want)
				}
			}
			if !strings.Contains(st.Message, tc.message) {
				t.Errorf("message %q, want it to say %q", st.Message, tc.message)
			}
		})
	}
}

func TestUntilStale(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	st := infrav1alpha1.WorkspaceStatus{UntouchedSince: ptr.To(metav1.NewTime(now.Add(-time.Hour)))}
	if got := untilStale(st, stalePolicy{after: 3 * time.Hour}, now); got != 2*time.Hour {
		t.Errorf("untouched 1h of a 3h policy: look again in %s, want 2h", got)
	}
	st.StaleSince, st.DeleteAt = ptr.To(metav1.NewTime(now)), ptr.To(metav1.NewTime(now.Add(time.Hour)))
	if got := untilStale(st, stalePolicy{after: time.Minute, deleteAfter: 2 * time.Hour}, now); got != time.Hour {
		t.Errorf("to be deleted in 1h: look again in %s, want 1h (a call since is seen before the reaper acts)", got)
	}
	if got := untilStale(infrav1alpha1.WorkspaceStatus{}, stalePolicy{after: time.Hour}, now); got != 0 {
		t.Errorf("running: look again in %s, want never", got)
	}
}

func TestStaleSettingsAreChecked(t *testing.T) {
	for _, tc := range []struct {
		name               string
		after, deleteAfter time.Duration
		ok                 bool
	}{
		{name: "neither", after: 0, deleteAfter: 0, ok: true},
		{name: "reported, never deleted", after: time.Hour, deleteAfter: 0, ok: true},
		{name: "deleted after the report's notice", after: time.Hour, deleteAfter: 2 * time.Hour, ok: true},
		{name: "deleted when reported: no notice", after: time.Hour, deleteAfter: time.Hour, ok: false},
		{name: "deleted, never reported", after: 0, deleteAfter: time.Hour, ok: false},
		{name: "negative", after: -time.Hour, deleteAfter: 0, ok: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := WorkspaceConfig{StaleAfter: tc.after, DeleteStaleAfter: tc.deleteAfter}.validateStale()
			if (err == nil) != tc.ok {
				t.Errorf("stale after %s, delete after %s: %v, want ok %v", tc.after, tc.deleteAfter, err, tc.ok)
			}
		})
	}
}

func TestDueForDeletion(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	due := func(mutate func(*infrav1alpha1.Workspace)) bool {
		ws := &infrav1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Generation: 1}, Status: infrav1alpha1.WorkspaceStatus{
			ObservedGeneration: 1, Phase: infrav1alpha1.WorkspaceStopped, UntouchedSince: ptr.To(metav1.NewTime(now.Add(-time.Hour))),
			DeleteAt: ptr.To(metav1.NewTime(now.Add(-time.Second)))}}
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

// TestATouchLasts: a stale workspace whose spec changes is fresh, and stays fresh at the
// reconciles after, once its status recorded the change; it is not deleted at the deletion
// time it had before.
func TestATouchLasts(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	pol := stalePolicy{after: 30 * day, deleteAfter: 37 * day}
	ws := &infrav1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Generation: 3}, Status: infrav1alpha1.WorkspaceStatus{
		ObservedGeneration: 2, Phase: infrav1alpha1.WorkspaceStopped, UntouchedSince: ptr.To(metav1.NewTime(now.Add(-40 * day))),
		StaleSince: ptr.To(metav1.NewTime(now.Add(-10 * day))), DeleteAt: ptr.To(metav1.NewTime(now.Add(-3 * day)))}}
	stopped := infrav1alpha1.WorkspaceStatus{Phase: infrav1alpha1.WorkspaceStopped}
	first := stoppedStatus(ws, stopped, pol, now)
	// The engine writes the status with the generation it reconciled.
	ws.Status, ws.Status.ObservedGeneration = first, 3
	later := stoppedStatus(ws, stopped, pol, now.Add(10*time.Second))
	if later.StaleSince != nil || later.DeleteAt != nil || !later.UntouchedSince.Equal(ptr.To(metav1.NewTime(now))) {
		t.Errorf("10 s after a change: untouched since %v, stale since %v, delete at %v; want untouched since the change, fresh",
			later.UntouchedSince, later.StaleSince, later.DeleteAt)
	}
	ws.Status = later
	if dueForDeletion(ws, now.Add(time.Minute)) {
		t.Error("a workspace changed a minute ago is due for deletion")
	}
}
