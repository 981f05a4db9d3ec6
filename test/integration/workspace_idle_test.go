package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/engine"
)

// fakeIDE answers /healthz as code-server does, with the last heartbeat lastUse gives, on
// 127.0.0.1; it returns its port.
func fakeIDE(t *testing.T, lastUse func() time.Time) int32 {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"status": "expired", "lastHeartbeat": lastUse().UnixMilli()})
	}))
	t.Cleanup(srv.Close)
	_, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(port)
	return int32(n)
}

// ideRunningSince plays the Deployment's pod: ready since since, at 127.0.0.1.
func ideRunningSince(t *testing.T, ws *infrav1alpha1.Workspace, since time.Time) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ws.Namespace, GenerateName: ws.Name + "-ide-", Labels: map[string]string{
			engine.LabelName: "workspace", engine.LabelInstance: ws.Name, engine.LabelManagedBy: engine.ManagedByValue,
		}},
		Spec: corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "ide", Image: "ide"}}},
	}
	if err := k8sClient.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "127.0.0.1", Conditions: []corev1.PodCondition{
		{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(since)},
	}}
	if err := k8sClient.Status().Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestAnUnusedIDEIsWarnedOfThenStoppedAndAUsedOneIsNot: two IDEs with a 1m idle timeout that
// started ten minutes ago; one was last used 50 s ago and never again, the other is in use.
// The operator reads both IDEs' activity: the unused one is warned of its stop
// (status.idleStopAt, the message), then stopped, its storage kept, not Degraded; the one in
// use runs on, unwarned. A change to its spec starts the stopped one again.
func TestAnUnusedIDEIsWarnedOfThenStoppedAndAUsedOneIsNot(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	// The heartbeat 100 s ago says it was in use until 40 s ago (code-server beats once a
	// minute while in use): with a 1m timeout, the warning is on and the stop 20 s away.
	tenMinutesAgo, lastUse := time.Now().Add(-10*time.Minute), time.Now().Add(-100*time.Second)
	minute := &metav1.Duration{Duration: time.Minute}
	idle := newWorkspace(t, ns, "idle", infrav1alpha1.WorkspaceSpec{Owner: "eve", IdleTimeout: minute,
		Port: fakeIDE(t, func() time.Time { return lastUse })})
	busy := newWorkspace(t, ns, "busy", infrav1alpha1.WorkspaceSpec{Owner: "eve", IdleTimeout: minute,
		Port: fakeIDE(t, time.Now)})
	eventually(t, timeout, phase(idle, infrav1alpha1.WorkspacePending))
	pod := ideRunningSince(t, idle, tenMinutesAgo)
	ideRunningSince(t, busy, tenMinutesAgo)

	eventually(t, timeout, func() error {
		if err := get(idle); err != nil {
			return err
		}
		if idle.Status.Phase != infrav1alpha1.WorkspaceRunning || idle.Status.IdleStopAt == nil || !strings.Contains(idle.Status.Message, "stops at") {
			return fmt.Errorf("phase %s, idleStopAt %v, %q; want Running with the warning", idle.Status.Phase, idle.Status.IdleStopAt, idle.Status.Message)
		}
		return nil
	})
	if want := lastUse.Add(2 * time.Minute); idle.Status.IdleStopAt.Sub(want).Abs() > 2*time.Second {
		t.Errorf("idleStopAt %s, want a minute after the use the heartbeat vouches for, %s", idle.Status.IdleStopAt, want)
	}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "idle"}}
	eventually(t, 2*timeout, replicas(dep, 0))
	if err := k8sClient.Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	eventually(t, timeout, phase(idle, infrav1alpha1.WorkspaceStopped))
	if idle.Status.StoppedReason != infrav1alpha1.StoppedIdle || meta.IsStatusConditionTrue(idle.Status.Conditions, infrav1alpha1.ConditionDegraded) {
		t.Errorf("stopped: reason %q, conditions %v; want Idle, not Degraded", idle.Status.StoppedReason, idle.Status.Conditions)
	}
	eventually(t, timeout, func() error { return eventOn(idle, corev1.EventTypeNormal, infrav1alpha1.EventIdleWarning, "stops at") })
	eventually(t, timeout, func() error {
		return eventOn(idle, corev1.EventTypeNormal, infrav1alpha1.EventStoppedByOperator, "unused")
	})
	if err := get(busy); err != nil || busy.Status.Phase != infrav1alpha1.WorkspaceRunning || busy.Status.IdleStopAt != nil {
		t.Errorf("the IDE in use: %s, idleStopAt %v (%v); want Running, unwarned", busy.Status.Phase, busy.Status.IdleStopAt, err)
	}

	patch := client.MergeFrom(idle.DeepCopy())
	idle.Spec.StartRequests++
	if err := k8sClient.Patch(ctx, idle, patch); err != nil {
		t.Fatal(err)
	}
	eventually(t, timeout, replicas(dep, 1))
}
