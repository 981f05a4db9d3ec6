package controllers

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
)

// The phases of a start, the phase label of cloudspace_start_seconds.
const (
	// StartPhaseTotal is the whole start: asked until the workload is ready (Workspace).
	StartPhaseTotal = "total"
	// StartPhaseOperator is asked until the pod exists: the operator's render and apply, and
	// the workload controller's rollout (Workspace).
	StartPhaseOperator = "operator"
	// StartPhaseScheduling is the pod created until it is bound to a node.
	StartPhaseScheduling = "scheduling"
	// StartPhaseContainers is the pod bound until it is ready: the image pulled, the
	// container started, its readiness probe passed (the IDE serving, QEMU started).
	StartPhaseContainers = "containers"
)

// The kinds' metrics. Their labels are bounded (a kind, a phase, a documented reason), never a
// resource or a user, so the series do not grow with what is served.
var (
	startSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "cloudspace_start_seconds",
		Help: "Time a start took until the pod was ready, by kind and phase: total and operator (from the start asked; Workspace), scheduling, containers.",
		// Kubernetes records these times to the second.
		Buckets: []float64{1, 2, 5, 10, 20, 30, 60, 120, 300, 600},
	}, []string{"kind", "phase"})
	operatorStops = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cloudspace_operator_stops_total",
		Help: "Resources the operator stopped, by kind and status.stoppedReason: Idle (unused for their idle timeout) or StartFailed.",
	}, []string{"kind", "reason"})
)

func init() {
	metrics.Registry.MustRegister(startSeconds, operatorStops)
}

// workspaceTransitions is what a new Workspace status tells the metrics, to observe once it
// is written (engine.StatusResult.Written): a start that made the IDE ready, or a stop by the
// operator. Nil when it tells them nothing.
func workspaceTransitions(ws *infrav1alpha1.Workspace, st infrav1alpha1.WorkspaceStatus, live []corev1.Pod) func() {
	switch {
	case st.Phase == infrav1alpha1.WorkspaceRunning && ws.Status.Phase != infrav1alpha1.WorkspaceRunning:
		if pod := readyPod(live); freshStart(ws.Status.StartRequestedAt, pod) {
			return observeStart(workspaceGVK.Kind, ws.Status.StartRequestedAt, pod)
		}
	case st.StoppedReason != "" && !ws.StoppedByOperator():
		return observeStop(workspaceGVK.Kind, st.StoppedReason)
	}
	return nil
}

// observeStop counts a stop by the operator of a resource of kind, for reason.
func observeStop(kind, reason string) func() {
	return func() { operatorStops.WithLabelValues(kind, reason).Inc() }
}

// freshStart reports whether pod was made for the start that began at since (nil: unknown): a
// pod older than that ran before (its readiness lost and regained, a container restarted), and
// its scheduling and containers phases are not this start's.
func freshStart(since *metav1.Time, pod *corev1.Pod) bool {
	return pod != nil && (since == nil || !pod.CreationTimestamp.Before(since))
}

// notReadySince is when a resource's Ready condition last became False; nil when it is not.
func notReadySince(conds []metav1.Condition) *metav1.Time {
	if c := meta.FindStatusCondition(conds, infrav1alpha1.ConditionReady); c != nil && c.Status == metav1.ConditionFalse {
		return &c.LastTransitionTime
	}
	return nil
}

// observeStart observes the phases of a start of kind that made pod ready (startPhases).
func observeStart(kind string, requested *metav1.Time, pod *corev1.Pod) func() {
	phases := startPhases(requested, pod)
	return func() {
		for phase, d := range phases {
			startSeconds.WithLabelValues(kind, phase).Observe(d.Seconds())
		}
	}
}

// startPhases splits a start that made pod ready, asked at requested, into its phases. A
// phase whose times are not known (a start asked before any status recorded it, a pod without
// the condition) is left out.
func startPhases(requested *metav1.Time, pod *corev1.Pod) map[string]time.Duration {
	if pod == nil {
		return nil
	}
	created := pod.CreationTimestamp.Time
	scheduled, ready := podConditionTime(pod, corev1.PodScheduled), podConditionTime(pod, corev1.PodReady)
	out := map[string]time.Duration{}
	span := func(phase string, from, to time.Time) {
		if !from.IsZero() && !to.IsZero() {
			out[phase] = max(to.Sub(from), 0)
		}
	}
	if requested != nil {
		span(StartPhaseTotal, requested.Time, ready)
		span(StartPhaseOperator, requested.Time, created)
	}
	span(StartPhaseScheduling, created, scheduled)
	span(StartPhaseContainers, scheduled, ready)
	return out
}

// podConditionTime is when pod's condition of type t last became what it is; zero when the
// pod has no such condition, or it is not True.
func podConditionTime(pod *corev1.Pod, t corev1.PodConditionType) time.Time {
	for _, c := range pod.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}
