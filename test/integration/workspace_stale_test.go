package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/controllers"
)

// TestAStaleWorkspaceIsReportedThenDeletedAndAStartedOneIsNot: with --workspace-stale-after 3s
// and --workspace-delete-stale-after 8s, a workspace left stopped is reported stale
// (status.staleSince and deleteAt, the message, a Stale event), then deleted at deleteAt (a
// DeletedStale event), its volume kept as its reclaimPolicy asks. Another, stopped as long but started before it became stale, is
// neither: starting is a touch.
func TestAStaleWorkspaceIsReportedThenDeletedAndAStartedOneIsNot(t *testing.T) {
	ns := newNamespace(t)
	t.Cleanup(func() { restartManager(t) })
	runWithWorkspaceConfig(t, ns, func(c *controllers.WorkspaceConfig) {
		c.StaleAfter, c.DeleteStaleAfter, c.StaleInterval = 3*time.Second, 8*time.Second, 200*time.Millisecond
	})
	left := newWorkspace(t, ns, "left", infrav1alpha1.WorkspaceSpec{Owner: "fay", Running: ptr.To(false),
		Storage: infrav1alpha1.WorkspaceStorage{ReclaimPolicy: infrav1alpha1.ReclaimRetain}})
	started := newWorkspace(t, ns, "started", infrav1alpha1.WorkspaceSpec{Owner: "fay", Running: ptr.To(false)})
	eventually(t, timeout, phase(left, infrav1alpha1.WorkspaceStopped))
	eventually(t, timeout, phase(started, infrav1alpha1.WorkspaceStopped))
	if err := k8sClient.Patch(context.Background(), started, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"running":true}}`))); err != nil {
		t.Fatal(err)
	}

	eventually(t, timeout, func() error {
		if err := get(left); err != nil {
			return err
		}
		if left.Status.StaleSince == nil || left.Status.DeleteAt == nil {
			return fmt.Errorf("not reported stale: %+v", left.Status)
		}
		return eventOn(left, corev1.EventTypeNormal, infrav1alpha1.EventStale, "will be deleted at")
	})
	if d, notice := left.Status.DeleteAt.Sub(left.Status.UntouchedSince.Time), left.Status.DeleteAt.Sub(left.Status.StaleSince.Time); d < 8*time.Second || notice < 5*time.Second {
		t.Errorf("to be deleted %s after it stopped and %s after the report, want at least 8s and 5s", d, notice)
	}
	deleted := left.DeepCopy()
	eventually(t, timeout, func() error { return gone(left) })
	if err := eventOn(deleted, corev1.EventTypeNormal, infrav1alpha1.EventDeletedStale, "--workspace-delete-stale-after"); err != nil {
		t.Error(err)
	}
	if err := get(&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "left-home"}}); err != nil {
		t.Errorf("the volume of a stale workspace that retains it: %v", err)
	}
	if err := get(started); err != nil || started.Status.StaleSince != nil || started.Status.DeleteAt != nil {
		t.Errorf("the workspace started in time: %v, stale since %v, to be deleted at %v", err, started.Status.StaleSince, started.Status.DeleteAt)
	}
}
