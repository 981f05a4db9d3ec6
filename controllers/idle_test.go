package controllers

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/engine"
)

func TestIdleTimeoutIsTheShorter(t *testing.T) {
	for _, tc := range []struct {
		name                string
		operator, own, want time.Duration
	}{
		{name: "neither", operator: 0, own: 0, want: 0},
		{name: "the operator's alone", operator: time.Hour, own: 0, want: time.Hour},
		{name: "the spec's alone", operator: 0, own: 10 * time.Minute, want: 10 * time.Minute},
		{name: "the spec asks for less", operator: time.Hour, own: 10 * time.Minute, want: 10 * time.Minute},
		{name: "the spec asks for more: never", operator: 10 * time.Minute, own: time.Hour, want: 10 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := testWorkspace(true, infrav1alpha1.WorkspaceStatus{})
			if tc.own > 0 {
				ws.Spec.IdleTimeout = &metav1.Duration{Duration: tc.own}
			}
			if got := (idlePolicy{timeout: tc.operator}).timeoutFor(ws.Spec.IdleTimeout); got != tc.want {
				t.Errorf("operator %s, spec %s: %s, want %s", tc.operator, tc.own, got, tc.want)
			}
		})
	}
}

// TestNoticeStop: a stop the operator made just now is an event, written at once and looked at
// again in a second (the next render halts what runs); an idle warning is an event alone; any
// other status leaves the kind its own notices.
func TestNoticeStop(t *testing.T) {
	stopAt := metav1.NewTime(t0)
	for _, tc := range []struct {
		name       string
		stoppedNow bool
		idleStopAt *metav1.Time
		want       engine.StatusResult
		noticed    bool
	}{
		{name: "stopped just now", stoppedNow: true,
			want:    engine.StatusResult{RequeueAfter: time.Second, Prompt: true, Notice: engine.Notice{Reason: infrav1alpha1.EventStoppedByOperator, Message: "m"}},
			noticed: true},
		{name: "warned of an idle stop", idleStopAt: &stopAt,
			want:    engine.StatusResult{RequeueAfter: time.Hour, Notice: engine.Notice{Reason: infrav1alpha1.EventIdleWarning, Message: "m"}},
			noticed: true},
		{name: "neither", want: engine.StatusResult{RequeueAfter: time.Hour}, noticed: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := engine.StatusResult{RequeueAfter: time.Hour}
			noticed := noticeStop(&res, tc.stoppedNow, tc.idleStopAt, "m")
			if noticed != tc.noticed || res.RequeueAfter != tc.want.RequeueAfter || res.Prompt != tc.want.Prompt || res.Notice != tc.want.Notice {
				t.Errorf("noticed %v, %+v; want %v, %+v", noticed, res, tc.noticed, tc.want)
			}
		})
	}
}
