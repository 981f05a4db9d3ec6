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
	// StartPhaseResume is the containers phase of a VM's start from a saved state (its spec's
	// stopAction Hibernate): the launcher's pod bound until the resumed guest answers. A state
	// that turned out not to match boots cold within it (status.hibernation says so).
	StartPhaseResume = "resume"
)

// The kinds' metrics. Their labels are bounded (a kind, a phase, a documented reason), never a
// resource or a user, so the series do not grow with what is served.
var (
	startSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "cloudspace_start_seconds",
		Help: "Time a start took until the pod was ready, by kind and phase: total and operator (from the start asked; Workspace), scheduling, containers, and resume (a VM's containers phase from a saved state).",
		// Kubernetes records these times to the second.
		Buckets: []float64{1, 2, 5, 10, 20, 30, 60, 120, 300, 600},
	}, []string{"kind", "phase"})
	operatorStops = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cloudspace_operator_stops_total",
		Help: "Resources the operator stopped, by kind and status.stoppedReason: Idle (unused for their idle timeout) or StartFailed.",
	}, []string{"kind", "reason"})
)

// observedPhases are the phases each kind's starts are observed in (startPhases): a VM's start
// has no asked-at time, so neither total nor operator.
var observedPhases = map[string][]string{
	workspaceGVK.Kind: {StartPhaseTotal, StartPhaseOperator, StartPhaseScheduling, StartPhaseContainers},
	vmGVK.Kind:        {StartPhaseScheduling, StartPhaseContainers, StartPhaseResume},
}

func init() {
	metrics.Registry.MustRegister(startSeconds, operatorStops)
	// Every series is there from the start, at zero: one that first appears with its first
	// observation shows Prometheus no increase, so a rate over it (the start-time graph,
	// CloudspaceStartSlow) would miss each first start or stop after the operator's own.
	for kind, phases := range observedPhases {
		for _, phase := range phases {
			startSeconds.WithLabelValues(kind, phase)
		}
		for _, reason := range []string{infrav1alpha1.StoppedIdle, infrav1alpha1.StoppedStartFailed} {
			operatorStops.WithLabelValues(kind, reason)
		}
	}
}

// workspaceTransitions is what a new Workspace status tells the metrics, to observe once it
// is written (engine.StatusResult.Written): a start that made the IDE ready, or a stop by the
// operator. Nil when it tells them nothing.
func workspaceTransitions(ws *infrav1alpha1.Workspace, st infrav1alpha1.WorkspaceStatus, live []corev1.Pod) func() {
	switch {
	case st.Phase == infrav1alpha1.WorkspaceRunning && ws.Status.Phase != infrav1alpha1.WorkspaceRunning:
		if pod := readyPod(live); freshStart(ws.Status.StartRequestedAt, pod) {
			return observeStart(workspaceGVK.Kind, startAsked(ws), pod, false)
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

// startRecordedLate is how much later than its pod a start may be recorded: the first status
// of a generation waits up to the engine's first-status delay (5 s) for the children, and a
// loaded API server adds to it, so a status's startRequestedAt can follow the pod it asked for.
const startRecordedLate = 30 * time.Second

// freshStart reports whether pod was made for the start recorded at since (nil: unknown): a
// pod made well before that ran before (its readiness lost and regained, a container
// restarted), and its scheduling and containers phases are not this start's.
func freshStart(since *metav1.Time, pod *corev1.Pod) bool {
	return pod != nil && (since == nil || !pod.CreationTimestamp.Add(startRecordedLate).Before(since.Time))
}

// startAsked is when a workspace's start was asked: when its status recorded it, but for the
// start it was created with its creation, which its status records later (up to
// startRecordedLate) or never (a first status put off until the IDE was ready).
func startAsked(ws *infrav1alpha1.Workspace) *metav1.Time {
	recorded, created := ws.Status.StartRequestedAt, ws.CreationTimestamp
	if created.IsZero() {
		return recorded
	}
	if ws.Status.Phase == "" || (recorded != nil && !recorded.Before(&created) && recorded.Sub(created.Time) <= startRecordedLate) {
		return &created
	}
	return recorded
}

// notReadySince is when a resource's Ready condition last became False; nil when it is not.
func notReadySince(conds []metav1.Condition) *metav1.Time {
	if c := meta.FindStatusCondition(conds, infrav1alpha1.ConditionReady); c != nil && c.Status == metav1.ConditionFalse {
		return &c.LastTransitionTime
	}
	return nil
}

// observeStart observes the phases of a start of kind that made pod ready (startPhases), one
// that resumed a saved state, its containers phase as resume too.
func observeStart(kind string, requested *metav1.Time, pod *corev1.Pod, resumed bool) func() {
	phases := startPhases(requested, pod)
	if d, ok := phases[StartPhaseContainers]; ok && resumed {
		phases[StartPhaseResume] = d
	}
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
