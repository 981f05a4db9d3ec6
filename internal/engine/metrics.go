package engine

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// engineMetrics are the engine's Prometheus metrics, served on the manager's metrics endpoint.
type engineMetrics struct {
	renderSeconds *prometheus.HistogramVec
	applySeconds  *prometheus.HistogramVec
	children      *prometheus.GaugeVec
	resources     *prometheus.GaugeVec

	mu sync.Mutex
	// conditions holds each CR's condition statuses, from which resources is counted.
	conditions map[string]map[types.NamespacedName]map[string]metav1.ConditionStatus
}

var (
	defaultMetrics     *engineMetrics
	defaultMetricsOnce sync.Once
)

// sharedMetrics returns the engine's metrics, registered once with controller-runtime's registry.
func sharedMetrics() *engineMetrics {
	defaultMetricsOnce.Do(func() {
		defaultMetrics = newEngineMetrics()
		metrics.Registry.MustRegister(defaultMetrics.renderSeconds, defaultMetrics.applySeconds,
			defaultMetrics.children, defaultMetrics.resources)
	})
	return defaultMetrics
}

func newEngineMetrics() *engineMetrics {
	buckets := []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}
	return &engineMetrics{
		renderSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "cloudspace_render_duration_seconds", Help: "Time to render a custom resource's chart.", Buckets: buckets,
		}, []string{"kind"}),
		applySeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "cloudspace_apply_duration_seconds", Help: "Time of one server-side apply of a child.", Buckets: buckets,
		}, []string{"kind"}),
		children: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "cloudspace_children", Help: "Children applied for each custom resource.",
		}, []string{"kind", "namespace", "name"}),
		resources: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "cloudspace_resources", Help: "Custom resources by condition type and status.",
		}, []string{"kind", "condition", "status"}),
		conditions: map[string]map[types.NamespacedName]map[string]metav1.ConditionStatus{},
	}
}

// observeConditions records a CR's conditions and moves its counts in the resources gauge.
func (m *engineMetrics) observeConditions(kind string, key types.NamespacedName, conds []metav1.Condition) {
	statuses := make(map[string]metav1.ConditionStatus, len(conds))
	for _, c := range conds {
		statuses[c.Type] = c.Status
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	byKey := m.conditions[kind]
	if byKey == nil {
		byKey = map[types.NamespacedName]map[string]metav1.ConditionStatus{}
		m.conditions[kind] = byKey
	}
	m.count(kind, byKey[key], -1)
	m.count(kind, statuses, +1)
	byKey[key] = statuses
}

// forget drops a deleted CR from the gauges.
func (m *engineMetrics) forget(kind string, key types.NamespacedName) {
	m.children.DeleteLabelValues(kind, key.Namespace, key.Name)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.count(kind, m.conditions[kind][key], -1)
	delete(m.conditions[kind], key)
}

func (m *engineMetrics) count(kind string, statuses map[string]metav1.ConditionStatus, delta float64) {
	for t, s := range statuses {
		m.resources.WithLabelValues(kind, t, string(s)).Add(delta)
	}
}
