package engine

import (
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
)

// engineMetrics are the engine's Prometheus metrics, served on the manager's metrics endpoint.
// Their labels are bounded: by kind, never by resource, so that the series do not grow with
// the resources served (a series per resource cost about 900 bytes each).
type engineMetrics struct {
	renderSeconds *prometheus.HistogramVec
	applySeconds  *prometheus.HistogramVec
	children      *prometheus.GaugeVec
	resources     *prometheus.GaugeVec
	failures      *prometheus.CounterVec

	mu sync.Mutex
	// seen is what each CR last reported, from which the gauges are counted.
	seen map[string]map[types.NamespacedName]seenResource
	// encodings holds one copy of each condition encoding: most CRs report the same statuses.
	encodings map[string]string
}

// seenResource is what one CR last reported: its children, and its conditions' statuses
// encoded as "Type=Status" pairs joined by commas.
type seenResource struct {
	children   int
	conditions string
}

var (
	defaultMetrics     *engineMetrics
	defaultMetricsOnce sync.Once
)

// The engine's metrics are served as soon as the engine is in the binary, observed or not.
func init() { sharedMetrics() }

// sharedMetrics returns the engine's metrics, registered once with controller-runtime's registry.
func sharedMetrics() *engineMetrics {
	defaultMetricsOnce.Do(func() {
		defaultMetrics = newEngineMetrics()
		metrics.Registry.MustRegister(defaultMetrics.renderSeconds, defaultMetrics.applySeconds,
			defaultMetrics.children, defaultMetrics.resources, defaultMetrics.failures)
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
			Name: "cloudspace_children", Help: "Children applied for the custom resources of a kind.",
		}, []string{"kind"}),
		resources: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "cloudspace_resources", Help: "Custom resources by condition type and status.",
		}, []string{"kind", "condition", "status"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cloudspace_failures_total", Help: "Custom resources that became Degraded, by the condition's reason.",
		}, []string{"kind", "reason"}),
		seen: map[string]map[types.NamespacedName]seenResource{}, encodings: map[string]string{},
	}
}

// observeConditions records a CR's conditions and moves its counts in the resources gauge.
func (m *engineMetrics) observeConditions(kind string, key types.NamespacedName, conds []metav1.Condition) {
	pairs := make([]string, 0, len(conds))
	for _, c := range conds {
		pairs = append(pairs, c.Type+"="+string(c.Status))
	}
	enc := strings.Join(pairs, ",")
	m.update(kind, key, func(r *seenResource) {
		if shared, ok := m.encodings[enc]; ok {
			enc = shared
		} else {
			m.encodings[enc] = enc
		}
		r.conditions = enc
	})
}

// observeFailure counts a CR that became Degraded, or Degraded for another reason: before and
// after are its Degraded condition before and after this reconcile. A reason is one of the
// engine's or a kind's documented constants, so the series are bounded by kind and reason.
func (m *engineMetrics) observeFailure(kind string, before metav1.Condition, after *metav1.Condition) {
	if after == nil || after.Status != metav1.ConditionTrue {
		return
	}
	if before.Status == metav1.ConditionTrue && before.Reason == after.Reason {
		return
	}
	m.failures.WithLabelValues(kind, after.Reason).Inc()
}

// startCounting puts kind's failure counts at zero for every reason Degraded can carry. A
// counter's series that first appears at 1 has no increase to Prometheus, so without them an
// alert on increase (CloudspaceCrashLooping) would miss each first failure of a kind and reason.
func (m *engineMetrics) startCounting(kind string) {
	for _, reason := range infrav1alpha1.DegradedReasons {
		m.failures.WithLabelValues(kind, reason)
	}
}

// observeChildren records how many children a CR has, in the children gauge.
func (m *engineMetrics) observeChildren(kind string, key types.NamespacedName, n int) {
	m.update(kind, key, func(r *seenResource) { r.children = n })
}

// update changes what key last reported, moving the gauges from the old record to the new.
func (m *engineMetrics) update(kind string, key types.NamespacedName, change func(*seenResource)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	byKey := m.seen[kind]
	if byKey == nil {
		byKey = map[types.NamespacedName]seenResource{}
		m.seen[kind] = byKey
	}
	r := byKey[key]
	m.count(kind, r, -1)
	change(&r)
	m.count(kind, r, +1)
	byKey[key] = r
}

// forget drops a deleted CR from the gauges.
func (m *engineMetrics) forget(kind string, key types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.seen[kind][key]
	if !ok {
		return
	}
	m.count(kind, r, -1)
	delete(m.seen[kind], key)
}

func (m *engineMetrics) count(kind string, r seenResource, delta float64) {
	if r.children != 0 {
		m.children.WithLabelValues(kind).Add(delta * float64(r.children))
	}
	for pair := range strings.SplitSeq(r.conditions, ",") {
		if t, s, ok := strings.Cut(pair, "="); ok {
			m.resources.WithLabelValues(kind, t, s).Add(delta)
		}
	}
}
