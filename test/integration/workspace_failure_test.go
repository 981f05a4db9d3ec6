package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/controllers"
)

// ideCrashing plays the kubelet's part for an IDE whose program exits at once: the IDE pod,
// scheduled, its container waiting in CrashLoopBackOff after restarts exits.
func ideCrashing(t *testing.T, ws *infrav1alpha1.Workspace, restarts int32) *corev1.Pod {
	t.Helper()
	p := ideReady(t, ws)
	crash(t, p, restarts)
	return p
}

// crash sets p's container to CrashLoopBackOff after restarts exits, the last with code 9.
func crash(t *testing.T, p *corev1.Pod, restarts int32) {
	t.Helper()
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.Now()}}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "ide", Image: p.Spec.Containers[0].Image, RestartCount: restarts,
		State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 10s restarting failed container"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 9, Reason: "Error", Message: "node: bad option"}}}}
	if err := k8sClient.Status().Update(context.Background(), p); err != nil {
		t.Fatal(err)
	}
}

// degradedBy waits for ws to be Degraded for reason, in phase, with a message saying want.
func degradedBy(ws *infrav1alpha1.Workspace, reason string, phase infrav1alpha1.WorkspacePhase, want string) func() error {
	return func() error {
		if err := get(ws); err != nil {
			return err
		}
		c := meta.FindStatusCondition(ws.Status.Conditions, infrav1alpha1.ConditionDegraded)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != reason || ws.Status.Phase != phase {
			return fmt.Errorf("phase %s, Degraded %+v; want %s, Degraded for %s", ws.Status.Phase, c, phase, reason)
		}
		if !strings.Contains(c.Message, want) || !strings.Contains(ws.Status.Message, want) {
			return fmt.Errorf("Degraded says %q, the phase %q: neither may lack %q", c.Message, ws.Status.Message, want)
		}
		return nil
	}
}

// TestACrashingIDEFailsAtOnceAndIsStoppedAfterFailedStarts: an IDE whose program exits is Failed
// and Degraded (CrashLoop, with its exit) on the kubelet's first back-off, not at the start
// timeout; at the operator's limit of failed starts it is stopped, its storage kept and its
// status saying why, and a change to its spec (the API's Start) starts it again.
func TestACrashingIDEFailsAtOnceAndIsStoppedAfterFailedStarts(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	ws := newWorkspace(t, ns, "crashy", infrav1alpha1.WorkspaceSpec{Owner: "dan"})
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "crashy"}}
	eventually(t, timeout, phase(ws, infrav1alpha1.WorkspacePending))

	pod := ideCrashing(t, ws, 1)
	eventually(t, timeout, degradedBy(ws, infrav1alpha1.ReasonCrashLoop, infrav1alpha1.WorkspaceFailed, "last exit 9 (Error): node: bad option"))
	if ws.Status.FailedStarts != 1 {
		t.Errorf("one failed start: failedStarts %d, want 1", ws.Status.FailedStarts)
	}
	if err := replicas(dep, 1)(); err != nil {
		t.Errorf("one failed start of %d stopped the IDE: %v", controllers.DefaultMaxFailedStarts, err)
	}

	crash(t, pod, controllers.DefaultMaxFailedStarts)
	eventually(t, timeout, replicas(dep, 0))
	if err := k8sClient.Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	eventually(t, timeout, degradedBy(ws, infrav1alpha1.ReasonStartFailed, infrav1alpha1.WorkspaceStopped, "stopped after 3 failed starts"))
	if ws.Status.StoppedReason != infrav1alpha1.ReasonStartFailed || !ws.Spec.WantsRunning() {
		t.Errorf("stopped: stoppedReason %q, spec running %v; want StartFailed, the spec untouched", ws.Status.StoppedReason, ws.Spec.WantsRunning())
	}
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "crashy-home"}}
	if err := get(pvc); err != nil || !pvc.DeletionTimestamp.IsZero() {
		t.Fatalf("the storage of the stopped workspace: %v", err)
	}

	patch := client.MergeFrom(ws.DeepCopy())
	ws.Spec.StartRequests++
	if err := k8sClient.Patch(ctx, ws, patch); err != nil {
		t.Fatal(err)
	}
	eventually(t, timeout, replicas(dep, 1))
	eventually(t, timeout, phase(ws, infrav1alpha1.WorkspacePending))
	if ws.Status.StoppedReason != "" || meta.IsStatusConditionTrue(ws.Status.Conditions, infrav1alpha1.ConditionDegraded) {
		t.Errorf("started again: stoppedReason %q, conditions %v; want neither", ws.Status.StoppedReason, ws.Status.Conditions)
	}
}
