package engine

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
)

func TestResourcesByCondition(t *testing.T) {
	m := newEngineMetrics()
	ready := func(s metav1.ConditionStatus) []metav1.Condition {
		return []metav1.Condition{{Type: "Ready", Status: s}}
	}
	a, b := types.NamespacedName{Namespace: "n", Name: "a"}, types.NamespacedName{Namespace: "n", Name: "b"}
	count := func(status string) float64 {
		return testutil.ToFloat64(m.resources.WithLabelValues("GenericDaemon", "Ready", status))
	}

	m.observeConditions("GenericDaemon", a, ready(metav1.ConditionFalse))
	m.observeConditions("GenericDaemon", b, ready(metav1.ConditionFalse))
	m.observeConditions("GenericDaemon", a, ready(metav1.ConditionTrue))
	m.observeConditions("GenericDaemon", a, ready(metav1.ConditionTrue))
	if count("True") != 1 || count("False") != 1 {
		t.Errorf("Ready True=%v False=%v, want 1 and 1", count("True"), count("False"))
	}
	m.forget("GenericDaemon", b)
	m.forget("GenericDaemon", b)
	if count("True") != 1 || count("False") != 0 {
		t.Errorf("after forgetting b: True=%v False=%v, want 1 and 0", count("True"), count("False"))
	}
}

// TestChildrenByKind: the children gauge counts a kind's children in one series, whatever the
// number of resources, and a forgotten resource's children leave it.
func TestChildrenByKind(t *testing.T) {
	m := newEngineMetrics()
	for i := range 100 {
		m.observeChildren("Demo", types.NamespacedName{Namespace: "n", Name: fmt.Sprint(i)}, 2)
	}
	a := types.NamespacedName{Namespace: "n", Name: "0"}
	m.observeChildren("Demo", a, 3)
	if n := testutil.CollectAndCount(m.children); n != 1 {
		t.Errorf("the children gauge has %d series for 100 Demos, want 1", n)
	}
	if got := testutil.ToFloat64(m.children.WithLabelValues("Demo")); got != 201 {
		t.Errorf("Demo children = %v, want 201", got)
	}
	m.forget("Demo", a)
	m.forget("Demo", a)
	if got := testutil.ToFloat64(m.children.WithLabelValues("Demo")); got != 198 {
		t.Errorf("after forgetting one Demo: children = %v, want 198", got)
	}
}

// TestFailuresCountTransitions: a resource counts once when it becomes Degraded and once more
// when its reason changes, not on every reconcile that finds it still failing.
func TestFailuresCountTransitions(t *testing.T) {
	m := newEngineMetrics()
	degraded := func(s metav1.ConditionStatus, reason string) *metav1.Condition {
		return &metav1.Condition{Type: "Degraded", Status: s, Reason: reason}
	}
	count := func(reason string) float64 {
		return testutil.ToFloat64(m.failures.WithLabelValues("Workspace", reason))
	}
	steps := []struct{ before, after *metav1.Condition }{
		{nil, degraded(metav1.ConditionFalse, "Applying")},
		{degraded(metav1.ConditionFalse, "Applying"), degraded(metav1.ConditionTrue, "CrashLoop")},
		{degraded(metav1.ConditionTrue, "CrashLoop"), degraded(metav1.ConditionTrue, "CrashLoop")},
		{degraded(metav1.ConditionTrue, "CrashLoop"), degraded(metav1.ConditionTrue, "StartFailed")},
		{degraded(metav1.ConditionTrue, "StartFailed"), nil},
	}
	for _, s := range steps {
		var before metav1.Condition
		if s.before != nil {
			before = *s.before
		}
		m.observeFailure("Workspace", before, s.after)
	}
	if count("CrashLoop") != 1 || count("StartFailed") != 1 || count("Applying") != 0 {
		t.Errorf("CrashLoop %v, StartFailed %v, Applying %v; want 1, 1, 0", count("CrashLoop"), count("StartFailed"), count("Applying"))
	}
}

// TestFailuresStartAtZero: once a kind is served, its failure count is at zero for every reason
// Degraded can carry, before any failure: Prometheus sees the first one as an increase.
func TestFailuresStartAtZero(t *testing.T) {
	m := newEngineMetrics()
	m.startCounting("Workspace")
	if n := testutil.CollectAndCount(m.failures); n != len(infrav1alpha1.DegradedReasons) {
		t.Errorf("%d failure series, want one per Degraded reason (%d)", n, len(infrav1alpha1.DegradedReasons))
	}
	if v := testutil.ToFloat64(m.failures.WithLabelValues("Workspace", infrav1alpha1.ReasonCrashLoop)); v != 0 {
		t.Errorf("CrashLoop count %v before any failure", v)
	}
}
