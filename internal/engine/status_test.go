package engine

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/render"
)

func child(kind string, status map[string]any, generation int64) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": kind,
		"metadata": map[string]any{"name": "c", "generation": generation}}}
	if status != nil {
		u.Object["status"] = status
	}
	return u
}

// TestSetStatus: every outcome's conditions, and what kstatus (as Flux, Argo CD and kpt run
// it) makes of the resource that carries them. A failure that lasts until something changes is
// Stalled with its generation observed, so kstatus says Failed at once; a failure that is
// retried, and children on their way, are Reconciling (InProgress).
func TestSetStatus(t *testing.T) {
	readyDS := child("DaemonSet", map[string]any{"observedGeneration": int64(1), "desiredNumberScheduled": int64(2),
		"numberReady": int64(2), "updatedNumberScheduled": int64(2), "numberAvailable": int64(2), "currentNumberScheduled": int64(2)}, 1)
	rollingDS := child("DaemonSet", map[string]any{"observedGeneration": int64(1), "desiredNumberScheduled": int64(2),
		"numberReady": int64(1), "updatedNumberScheduled": int64(1), "numberAvailable": int64(1)}, 1)
	boom := errors.New("boom")
	children := func(c ...*unstructured.Unstructured) []*unstructured.Unstructured { return c }
	const gen = 3
	cases := []struct {
		name                       string
		o                          outcome
		ready, progressing, degrad metav1.ConditionStatus
		reason                     string
		reconciling, stalled       bool
		kstatus                    kstatus.Status
	}{
		{"all current", outcome{children: children(readyDS)}, "True", "False", "False", infrav1alpha1.ReasonReconciled, false, false, kstatus.CurrentStatus},
		{"rolling out", outcome{children: children(readyDS, rollingDS)}, "False", "True", "False", infrav1alpha1.ReasonApplying, true, false, kstatus.InProgressStatus},
		{"render failed", outcome{err: &render.TemplateError{Err: boom}, reason: infrav1alpha1.ReasonRenderFailed, stalled: true}, "False", "False", "True", infrav1alpha1.ReasonRenderFailed, false, true, kstatus.FailedStatus},
		{"values invalid", outcome{err: &render.ValuesError{Err: boom}, reason: infrav1alpha1.ReasonValuesInvalid, stalled: true}, "False", "False", "True", infrav1alpha1.ReasonValuesInvalid, false, true, kstatus.FailedStatus},
		{"discovery failed, retried", outcome{err: boom, reason: infrav1alpha1.ReasonRenderFailed}, "False", "False", "True", infrav1alpha1.ReasonRenderFailed, true, false, kstatus.InProgressStatus},
		{"child refused as invalid", outcome{err: &childInvalidError{err: boom}, reason: infrav1alpha1.ReasonApplyFailed, stalled: true}, "False", "False", "True", infrav1alpha1.ReasonApplyFailed, false, true, kstatus.FailedStatus},
		{"apply failed, retried", outcome{err: boom, reason: infrav1alpha1.ReasonApplyFailed}, "False", "False", "True", infrav1alpha1.ReasonApplyFailed, true, false, kstatus.InProgressStatus},
		{"prune failed, retried", outcome{err: boom, reason: infrav1alpha1.ReasonPruneFailed}, "False", "False", "True", infrav1alpha1.ReasonPruneFailed, true, false, kstatus.InProgressStatus},
		{"ownership conflict", outcome{err: boom, reason: infrav1alpha1.ReasonOwnershipConflict, stalled: true}, "False", "False", "True", infrav1alpha1.ReasonOwnershipConflict, false, true, kstatus.FailedStatus},
		{"volume of another user", outcome{err: boom, reason: infrav1alpha1.ReasonVolumeOwnedByAnotherUser, stalled: true}, "False", "False", "True", infrav1alpha1.ReasonVolumeOwnedByAnotherUser, false, true, kstatus.FailedStatus},
		{"workload failing", outcome{children: children(rollingDS), workloadFailure: "container c: CrashLoopBackOff"}, "False", "False", "True", infrav1alpha1.ReasonChildFailed, false, true, kstatus.FailedStatus},
		{"child failed", outcome{children: children(failedChild())}, "False", "False", "True", infrav1alpha1.ReasonChildFailed, false, true, kstatus.FailedStatus},
		{"workload failing for the kind's reason", outcome{children: children(readyDS), workloadFailure: "host taken", workloadReason: infrav1alpha1.ReasonIngressHostConflict},
			"False", "False", "True", infrav1alpha1.ReasonIngressHostConflict, false, true, kstatus.FailedStatus},
		{"host not allowed", outcome{children: children(readyDS), workloadFailure: "host not allowed", workloadReason: infrav1alpha1.ReasonIngressHostNotAllowed},
			"False", "False", "True", infrav1alpha1.ReasonIngressHostNotAllowed, false, true, kstatus.FailedStatus},
		{"a failed child outranks the kind's reason", outcome{children: children(failedChild()), workloadFailure: "host taken", workloadReason: infrav1alpha1.ReasonIngressHostConflict},
			"False", "False", "True", infrav1alpha1.ReasonChildFailed, false, true, kstatus.FailedStatus},
		{"paused", outcome{paused: true}, "False", "False", "False", infrav1alpha1.ReasonPaused, false, false, kstatus.InProgressStatus},
		{"deleting", outcome{deleting: true}, "False", "True", "False", infrav1alpha1.ReasonDeleting, true, false, kstatus.TerminatingStatus},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.generation = gen
			// A reconcile that got as far as the children observed the generation; any
			// other left the last one.
			st := engineStatus{ObservedGeneration: gen - 1}
			if tc.o.children != nil {
				st.ObservedGeneration = gen
			}
			setStatus(&st, tc.o)
			want := map[string]metav1.ConditionStatus{
				infrav1alpha1.ConditionReady: tc.ready, infrav1alpha1.ConditionProgressing: tc.progressing, infrav1alpha1.ConditionDegraded: tc.degrad,
			}
			if tc.reconciling {
				want[infrav1alpha1.ConditionReconciling] = metav1.ConditionTrue
			}
			if tc.stalled {
				want[infrav1alpha1.ConditionStalled] = metav1.ConditionTrue
			}
			for _, c := range st.Conditions {
				if c.Status != want[c.Type] || c.Reason != tc.reason || c.ObservedGeneration != gen {
					t.Errorf("%s = %s/%s (gen %d), want %s/%s (gen %d)", c.Type, c.Status, c.Reason, c.ObservedGeneration, want[c.Type], tc.reason, gen)
				}
			}
			if len(st.Conditions) != len(want) {
				t.Errorf("got %d conditions, want %d: %v", len(st.Conditions), len(want), st.Conditions)
			}
			if got := kstatusOf(t, st, gen, tc.o.deleting); got != tc.kstatus {
				t.Errorf("kstatus = %s, want %s", got, tc.kstatus)
			}
		})
	}
}

// kstatusOf is kstatus's verdict on a resource of generation gen with status st.
func kstatusOf(t *testing.T, st engineStatus, gen int64, deleting bool) kstatus.Status {
	t.Helper()
	obj := &unstructured.Unstructured{}
	obj.SetAPIVersion("demo.cloudspace.dev/v1alpha1")
	obj.SetKind("Demo")
	obj.SetName("d")
	obj.SetGeneration(gen)
	if deleting {
		now := metav1.Now()
		obj.SetDeletionTimestamp(&now)
	}
	if err := writeStatus(obj, st, nil); err != nil {
		t.Fatal(err)
	}
	res, err := kstatus.Compute(obj)
	if err != nil {
		t.Fatal(err)
	}
	return res.Status
}

func TestSetStatusKeepsTransitionTimeWhenUnchanged(t *testing.T) {
	var st engineStatus
	setStatus(&st, outcome{})
	first := st.Conditions[0].LastTransitionTime
	st.Conditions[0].LastTransitionTime = metav1.NewTime(first.Add(-3600e9))
	setStatus(&st, outcome{})
	if !st.Conditions[0].LastTransitionTime.Time.Equal(first.Add(-3600e9)) {
		t.Error("an unchanged condition got a new transition time, which would write status on every reconcile")
	}
}

func TestReasonFor(t *testing.T) {
	if r := reasonFor(&render.ValuesError{Err: errors.New("x")}); r != infrav1alpha1.ReasonValuesInvalid {
		t.Errorf("values error → %s", r)
	}
	if r := reasonFor(errors.New("x")); r != infrav1alpha1.ReasonRenderFailed {
		t.Errorf("other error → %s", r)
	}
	if isRenderError(errors.New("reading cluster capabilities: timeout")) {
		t.Error("a discovery failure was taken for a render error (it would never be retried)")
	}
	if !isRenderError(fmt.Errorf("wrapped: %w", &render.TemplateError{Err: errors.New("x")})) {
		t.Error("a wrapped template error was not recognized")
	}
}

// TestWriteStatusOwnsTheKeys: the kind's fields are its whole part of the status (a field it
// leaves out, or sets to nil, is removed), and it can never replace the engine's own keys.
func TestWriteStatusOwnsTheKeys(t *testing.T) {
	obj := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{
		"installed": int64(1), "phase": "Running", "nodeName": "n1", "observedGeneration": int64(1),
	}}}
	st := engineStatus{ObservedGeneration: 2, Inventory: &infrav1alpha1.Inventory{Entries: []infrav1alpha1.InventoryEntry{{ID: "a_b__C", Version: "v1"}}}}
	fields := map[string]any{"installed": int64(3), "phase": nil, "observedGeneration": int64(9), "conditions": []any{"forged"}}
	if err := writeStatus(obj, st, fields); err != nil {
		t.Fatal(err)
	}
	got, _, _ := unstructured.NestedMap(obj.Object, "status")
	if got["installed"] != int64(3) || got["observedGeneration"] != int64(2) {
		t.Errorf("status = %v: want the kind's installed and the engine's observedGeneration", got)
	}
	for _, gone := range []string{"phase", "nodeName", "conditions"} {
		if _, ok := got[gone]; ok {
			t.Errorf("status.%s = %v, want it removed", gone, got[gone])
		}
	}
	back, err := readStatus(obj)
	if err != nil || back.ObservedGeneration != 2 || len(back.Inventory.Entries) != 1 {
		t.Errorf("readStatus = %+v, %v", back, err)
	}
	if !strings.Contains(describe(child("DaemonSet", nil, 1)), "DaemonSet c") {
		t.Error("describe")
	}
}

func TestProgressOnly(t *testing.T) {
	status := func(installed int64, ready, msg string, gen int64) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{
			"installed": installed, "observedGeneration": gen,
			"conditions": []any{map[string]any{"type": "Ready", "status": ready, "reason": "Applying", "message": msg}},
		}}}
	}
	base := status(0, "False", "Available: 0/2", 1)
	progress := []string{"installed"}
	cases := []struct {
		name string
		next *unstructured.Unstructured
		want bool
	}{
		{"count and message moved", status(1, "False", "Available: 1/2", 1), true},
		{"condition status changed", status(2, "True", "2 children are ready", 1), false},
		{"new generation observed", status(1, "False", "Available: 1/2", 2), false},
	}
	for _, tc := range cases {
		if got := progressOnly(base, tc.next, progress); got != tc.want {
			t.Errorf("%s: progressOnly = %v, want %v", tc.name, got, tc.want)
		}
	}
	if progressOnly(base, status(1, "False", "Available: 0/2", 1), nil) {
		t.Error("a field not named as progress was treated as progress")
	}
	if base.Object["status"].(map[string]any)["installed"] != int64(0) {
		t.Error("progressOnly modified its input")
	}
}

func TestMergeInventoryKeepsEveryEntryOnce(t *testing.T) {
	e := func(ids ...string) *infrav1alpha1.Inventory {
		inv := &infrav1alpha1.Inventory{}
		for _, id := range ids {
			inv.Entries = append(inv.Entries, infrav1alpha1.InventoryEntry{ID: id, Version: "v1"})
		}
		return inv
	}
	got := mergeInventory(e("a", "b"), e("b", "c"))
	if len(got.Entries) != 3 || got.Entries[0].ID != "a" || got.Entries[2].ID != "c" {
		t.Errorf("merged = %+v, want a, b, c", got.Entries)
	}
	if got := mergeInventory(nil, e("x")); len(got.Entries) != 1 {
		t.Errorf("merged with nothing = %+v", got)
	}
}

func TestFirstStatusIsPutOffUnlessPrompt(t *testing.T) {
	obj := &unstructured.Unstructured{Object: map[string]any{}}
	obj.SetName("ws")
	obj.SetGeneration(1)
	applying := []metav1.Condition{{Type: infrav1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: infrav1alpha1.ReasonApplying}}
	for _, tc := range []struct {
		name   string
		prompt bool
		putOff bool
	}{
		{"children on their way to ready", false, true},
		{"a status the kind wants written at once", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newStatusWriter(nil, config{firstStatusDelay: 5 * time.Second})
			s := &scope{obj: obj, status: engineStatus{Conditions: applying}, prompt: tc.prompt}
			if got := w.firstWait(obj, s) > 0; got != tc.putOff {
				t.Errorf("put off = %v, want %v", got, tc.putOff)
			}
		})
	}
}

// failedChild is a Deployment kstatus finds Failed: its rollout exceeded its deadline.
func failedChild() *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "d", "generation": int64(1)},
		"status": map[string]any{"observedGeneration": int64(1), "conditions": []any{map[string]any{
			"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}}},
	}}
	return u
}
