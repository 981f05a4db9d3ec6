package engine

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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
