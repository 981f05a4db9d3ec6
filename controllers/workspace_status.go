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

// Status computes the phase and the IDE's whereabouts from its pod.
func (l WorkspaceLifecycle) Status(obj *unstructured.Unstructured, observed engine.Observed) (engine.StatusResult, error) {
	ws, err := workspace.Decode(obj)
	if err != nil {
		return engine.StatusResult{}, err
	}
	pods, err := podsOf(observed.Pods)
	if err != nil {
		return engine.StatusResult{}, err
	}
	st := workspaceStatus(ws, pods, l.now())
	fields, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&st)
	if err != nil {
		return engine.StatusResult{}, err
	}
	return engine.StatusResult{Fields: fields, RequeueAfter: untilTimeout(ws, st, l.now()), Prompt: awaited(st.Phase)}, nil
}

// awaited reports whether a create-and-wait call may be waiting to read phase (Running, or
// Failed), so that it is written at once rather than when the Deployment's own status has
// caught up with its pod.
func awaited(phase infrav1alpha1.WorkspacePhase) bool {
	return phase == infrav1alpha1.WorkspaceRunning || phase == infrav1alpha1.WorkspaceFailed
}

// workspaceStatus is the pure phase machine: the previous status, the pods and the time in,
// the new status out.
func workspaceStatus(ws *infrav1alpha1.Workspace, pods []corev1.Pod, now time.Time) infrav1alpha1.WorkspaceStatus {
	prev := ws.Status
	st := infrav1alpha1.WorkspaceStatus{Port: orDefault(ws.Spec.Port, workspace.DefaultPort), URL: workspaceURL(ws)}
	live := livePods(pods)
	if !ws.Spec.WantsRunning() {
		st.Phase, st.Message = infrav1alpha1.WorkspaceStopped, "stopped; the storage is kept"
		if len(live) > 0 {
			st.Phase, st.Message = infrav1alpha1.WorkspaceStopping, "waiting for the IDE pod to exit"
		}
		return st
	}
	if p := readyPod(live); p != nil {
		st.Phase, st.NodeName, st.PodIP = infrav1alpha1.WorkspaceRunning, p.Spec.NodeName, p.Status.PodIP
		st.StartedAt = prev.StartedAt
		if prev.Phase != infrav1alpha1.WorkspaceRunning || st.StartedAt == nil {
			st.StartedAt = readySince(p, now)
		}
		return st
	}
	// Starting: the timeout counts from when this start began.
	st.StartRequestedAt = prev.StartRequestedAt
	if !isStarting(prev.Phase) || st.StartRequestedAt == nil {
		t := metav1.NewTime(now.Truncate(time.Second))
		st.StartRequestedAt = &t
	}
	st.Phase, st.Message = startingPhase(live)
	if now.Sub(st.StartRequestedAt.Time) >= startTimeout(ws) {
		st.Phase = infrav1alpha1.WorkspaceFailed
		st.Message = fmt.Sprintf("the IDE did not become ready within %s: %s", startTimeout(ws), st.Message)
	}
	return st
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
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && !c.LastTransitionTime.IsZero() {
			t := c.LastTransitionTime
			return &t
		}
	}
	t := metav1.NewTime(now.Truncate(time.Second))
	return &t
}

// workspaceURL is the ingress host when there is one, else the in-cluster Service address.
func workspaceURL(ws *infrav1alpha1.Workspace) string {
	if ws.Spec.Ingress != nil && ws.Spec.Ingress.Host != "" {
		return "https://" + ws.Spec.Ingress.Host + "/"
	}
	return fmt.Sprintf("http://%s.%s.svc:%d/", ws.Name, ws.Namespace, orDefault(ws.Spec.Port, workspace.DefaultPort))
}
