package controllers

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/engine"
	"github.com/cloudspace-dev/cloudspace-operator/internal/workspace"
)

// workspaceKept says what a stopped workspace keeps.
const workspaceKept = "the storage is kept"

// Status computes the phase and the IDE's whereabouts from its pod; an IDE failing to start is
// Degraded with the reason (a crash loop, an image that cannot be pulled, a timeout).
func (l WorkspaceLifecycle) Status(obj *unstructured.Unstructured, observed engine.Observed) (engine.StatusResult, error) {
	ws, err := workspace.Decode(obj)
	if err != nil {
		return engine.StatusResult{}, err
	}
	pods, err := podsOf(observed.Pods)
	if err != nil {
		return engine.StatusResult{}, err
	}
	use := l.Activity.Of(ws.UID)
	now, pol := l.now(), policy{maxFailedStarts: l.MaxFailedStarts, idle: l.idle(use), stale: l.stale(use),
		node: nodeProblem("IDE", pods, observed.Children, observed.Nodes)}
	st, failure := workspaceStatus(ws, pods, pol, now)
	fields, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&st)
	if err != nil {
		return engine.StatusResult{}, err
	}
	res := engine.StatusResult{Fields: fields, Prompt: awaited(st.Phase), Failure: failure.message, FailureReason: failure.reason,
		RequeueAfter: soonest(untilTimeout(ws, st, now), soonest(pol.idle.untilCheck(st.Phase == infrav1alpha1.WorkspaceRunning, ws.Spec.IdleTimeout, st.StartedAt, now), untilStale(st, pol.stale, now))),
		Written:      workspaceTransitions(ws, st, livePods(pods))}
	stoppedNow := st.StoppedReason != "" && !ws.StoppedByOperator()
	if !noticeStop(&res, stoppedNow, st.IdleStopAt, st.Message) && newlyStale(ws, st) {
		res.Notice = engine.Notice{Reason: infrav1alpha1.EventStale, Message: st.Message}
	}
	return res, nil
}

// awaited reports whether a create-and-wait call may be waiting to read phase (Running, or
// Failed), so that it is written at once rather than when the Deployment's own status has
// caught up with its pod.
func awaited(phase infrav1alpha1.WorkspacePhase) bool {
	return phase == infrav1alpha1.WorkspaceRunning || phase == infrav1alpha1.WorkspaceFailed
}

// policy is what the operator's settings and observations bring to the phase machine.
type policy struct {
	// maxFailedStarts is the failed starts after which the IDE is stopped; 0: never.
	maxFailedStarts int
	idle            idlePolicy
	stale           stalePolicy
	// node is what the IDE's node says when its pod is not running (nodeProblem).
	node nodeIssue
}

// soonest is the sooner of two waits, either 0 for none.
func soonest(a, b time.Duration) time.Duration {
	if a <= 0 || (b > 0 && b < a) {
		return b
	}
	return a
}

// workspaceStatus is the pure phase machine: the previous status, the pods, the policy and the
// time in; the new status out, and why the IDE is failing when it is.
func workspaceStatus(ws *infrav1alpha1.Workspace, pods []corev1.Pod, pol policy, now time.Time) (infrav1alpha1.WorkspaceStatus, problem) {
	prev := ws.Status
	st := infrav1alpha1.WorkspaceStatus{Port: orDefault(ws.Spec.Port, workspace.DefaultPort), URL: workspaceURL(ws)}
	live := livePods(pods)
	switch {
	case !ws.Spec.WantsRunning():
		st.Phase, st.Message = stoppedPhase(live), "stopped; "+workspaceKept
		if st.Phase == infrav1alpha1.WorkspaceStopping {
			st.Message = "waiting for the IDE pod to exit"
		}
		return stoppedStatus(ws, st, pol.stale, now), problem{}
	case ws.StoppedByOperator():
		st.Phase, st.Message = stoppedPhase(live), prev.Message
		st.StoppedReason, st.Restarts, st.FailedStarts = prev.StoppedReason, prev.Restarts, prev.FailedStarts
		if st.StoppedReason != infrav1alpha1.StoppedStartFailed {
			return stoppedStatus(ws, st, pol.stale, now), problem{} // stopped for being unused: nothing failed
		}
		return stoppedStatus(ws, st, pol.stale, now), problem{reason: infrav1alpha1.ReasonStartFailed, message: prev.Message}
	}
	if p := readyPod(live); p != nil {
		st.Phase, st.NodeName, st.PodIP = infrav1alpha1.WorkspaceRunning, p.Spec.NodeName, p.Status.PodIP
		st.Restarts, _ = podProblems(live)
		st.StartedAt = prev.StartedAt
		if prev.Phase != infrav1alpha1.WorkspaceRunning || st.StartedAt == nil {
			st.StartedAt = readySince(p, now)
		}
		return idleStatus(ws, st, pol.idle, now), problem{}
	}
	return startingStatus(ws, st, live, pol, now)
}

// stoppedPhase is Stopping while the IDE pod is still there, else Stopped.
func stoppedPhase(live []corev1.Pod) infrav1alpha1.WorkspacePhase {
	if len(live) > 0 {
		return infrav1alpha1.WorkspaceStopping
	}
	return infrav1alpha1.WorkspaceStopped
}

// startingStatus is a start in progress: the timeout counts from when it began; a container
// that cannot start makes it Failed at once, and maxFailedStarts exits (0: no limit) stop it.
// A lost node makes it Failed, naming the node; a pod waiting for its volume's node stays
// Pending, saying so; neither times out, since the node's return ends both.
func startingStatus(ws *infrav1alpha1.Workspace, st infrav1alpha1.WorkspaceStatus, live []corev1.Pod, pol policy, now time.Time) (infrav1alpha1.WorkspaceStatus, problem) {
	maxFailedStarts := pol.maxFailedStarts
	prev := ws.Status
	st.StartRequestedAt = prev.StartRequestedAt
	if !isStarting(prev.Phase) || st.StartRequestedAt == nil {
		t := metav1.NewTime(now.Truncate(time.Second))
		st.StartRequestedAt = &t
	}
	var failed int32 // failed starts before this reconcile: none when this start is new
	if isStarting(prev.Phase) && prev.StartRequestedAt != nil {
		failed = prev.FailedStarts
	}
	st.Phase, st.Message = startingPhase(live)
	var failure problem
	st.Restarts, failure = podProblems(live)
	// Exits since the status last written: a new pod counts from zero.
	st.FailedStarts = failed + max(0, st.Restarts-prev.Restarts)
	switch {
	case maxFailedStarts > 0 && int(st.FailedStarts) >= maxFailedStarts:
		last := failure.message
		if last == "" {
			last = st.Message
		}
		st.Phase, st.StoppedReason = infrav1alpha1.WorkspaceStopping, infrav1alpha1.StoppedStartFailed
		st.Message = fmt.Sprintf("stopped after %d failed starts; %s: %s", st.FailedStarts, workspaceKept, last)
		return st, problem{reason: infrav1alpha1.ReasonStartFailed, message: st.Message}
	case failure.reason != "":
		st.Phase, st.Message = infrav1alpha1.WorkspaceFailed, failure.message
		return st, failure
	case pol.node.reason != "":
		// The start's clock restarts once the node is back: the wait was the node's.
		st.Message, st.StartRequestedAt = pol.node.message, nil
		if !pol.node.waiting {
			st.Phase = infrav1alpha1.WorkspaceFailed
		}
		return st, pol.node.problem
	case now.Sub(st.StartRequestedAt.Time) >= startTimeout(ws):
		st.Phase = infrav1alpha1.WorkspaceFailed
		st.Message = fmt.Sprintf("the IDE did not become ready within %s: %s", startTimeout(ws), st.Message)
		return st, problem{reason: infrav1alpha1.ReasonStartTimedOut, message: st.Message}
	}
	return st, problem{}
}

func isStarting(p infrav1alpha1.WorkspacePhase) bool {
	return p == infrav1alpha1.WorkspacePending || p == infrav1alpha1.WorkspaceStarting || p == infrav1alpha1.WorkspaceFailed
}

func startTimeout(ws *infrav1alpha1.Workspace) time.Duration {
	if ws.Spec.StartTimeout == nil || ws.Spec.StartTimeout.Duration <= 0 {
		return workspace.DefaultStartTimeout
	}
	return ws.Spec.StartTimeout.Duration
}

// untilTimeout is how long until a start in progress times out (0 when none is).
func untilTimeout(ws *infrav1alpha1.Workspace, st infrav1alpha1.WorkspaceStatus, now time.Time) time.Duration {
	if st.StartRequestedAt == nil || st.Phase == infrav1alpha1.WorkspaceFailed {
		return 0
	}
	return max(st.StartRequestedAt.Add(startTimeout(ws)).Sub(now), time.Second)
}

// startingPhase says Pending until the pod is scheduled, then Starting, with the reason the
// pod gives.
func startingPhase(live []corev1.Pod) (infrav1alpha1.WorkspacePhase, string) {
	if len(live) == 0 {
		return infrav1alpha1.WorkspacePending, "waiting for the IDE pod to be created"
	}
	p := live[0]
	if p.Spec.NodeName == "" {
		msg := "waiting for the IDE pod to be scheduled"
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Message != "" {
				msg += ": " + c.Message
			}
		}
		return infrav1alpha1.WorkspacePending, msg
	}
	var reasons []string
	for _, cs := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
		if w := cs.State.Waiting; w != nil && w.Reason != "" {
			reasons = append(reasons, fmt.Sprintf("%s: %s %s", cs.Name, w.Reason, w.Message))
		}
	}
	if len(reasons) > 0 {
		return infrav1alpha1.WorkspaceStarting, strings.TrimSpace(strings.Join(reasons, "; "))
	}
	return infrav1alpha1.WorkspaceStarting, "waiting for the IDE to become ready on " + p.Spec.NodeName
}

func readySince(p *corev1.Pod, now time.Time) *metav1.Time {
	t := metav1.NewTime(podConditionTime(p, corev1.PodReady))
	if t.IsZero() {
		t = metav1.NewTime(now.Truncate(time.Second))
	}
	return &t
}

// workspaceURL is the ingress host when there is one, else the in-cluster Service address.
func workspaceURL(ws *infrav1alpha1.Workspace) string {
	if ws.Spec.Ingress != nil && ws.Spec.Ingress.Host != "" {
		return "https://" + ws.Spec.Ingress.Host + "/"
	}
	return fmt.Sprintf("http://%s.%s.svc:%d/", ws.Name, ws.Namespace, orDefault(ws.Spec.Port, workspace.DefaultPort))
}
