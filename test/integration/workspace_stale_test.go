package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/controllers"
	"github.com/cloudspace-dev/cloudspace-operator/internal/engine"
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
	// The event is sent after the delete, by the recorder's own goroutine.
	eventually(t, timeout, func() error {
		return eventOn(deleted, corev1.EventTypeNormal, infrav1alpha1.EventDeletedStale, "--workspace-delete-stale-after")
	})
	if err := get(&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "left-home"}}); err != nil {
		t.Errorf("the volume of a stale workspace that retains it: %v", err)
	}
	if err := get(started); err != nil || started.Status.StaleSince != nil || started.Status.DeleteAt != nil {
		t.Errorf("the workspace started in time: %v, stale since %v, to be deleted at %v", err, started.Status.StaleSince, started.Status.DeleteAt)
	}
}

// TestAKeptVolumeTakenBackByNoneIsReportedThenDeleted: with --workspace-stale-after 2s and
// --workspace-delete-stale-after 5s, the volume a deleted workspace kept (reclaimPolicy Retain)
// and no workspace took back is reported stale (its annotations say since when and when it goes,
// a Stale event), then deleted (a DeletedStale event). One taken back by a new workspace of its
// name and owner is neither, nor is a claim carrying the chart's labels without the record of a
// release, nor one with another claim's sealed record copied onto it.
func TestAKeptVolumeTakenBackByNoneIsReportedThenDeleted(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	t.Cleanup(func() { restartManager(t) })
	runWithWorkspaceConfig(t, ns, func(c *controllers.WorkspaceConfig) {
		c.StaleAfter, c.DeleteStaleAfter, c.StaleInterval = 2*time.Second, 5*time.Second, 200*time.Millisecond
	})
	keep := infrav1alpha1.WorkspaceSpec{Owner: "gil", Running: ptr.To(false), Storage: infrav1alpha1.WorkspaceStorage{ReclaimPolicy: infrav1alpha1.ReclaimRetain}}
	left, back := newWorkspace(t, ns, "left", keep), newWorkspace(t, ns, "back", keep)
	mine := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mine",
		Labels: map[string]string{"app.kubernetes.io/name": "workspace", "app.kubernetes.io/part-of": "cloudspace"}},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
	if err := k8sClient.Create(ctx, mine); err != nil {
		t.Fatal(err)
	}
	for _, ws := range []*infrav1alpha1.Workspace{left, back} {
		eventually(t, timeout, phase(ws, infrav1alpha1.WorkspaceStopped))
		if err := k8sClient.Delete(ctx, ws); err != nil {
			t.Fatal(err)
		}
		eventually(t, timeout, func() error { return gone(ws) })
	}
	// A claim with left-home's release record copied onto it: written by a tenant, not sealed
	// for this claim by the operator.
	leftHome := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "left-home"}}
	if err := get(leftHome); err != nil {
		t.Fatal(err)
	}
	forged := mine.DeepCopy()
	forged.ObjectMeta = metav1.ObjectMeta{Namespace: ns, Name: "forged", Labels: mine.Labels, Annotations: map[string]string{}}
	for _, k := range []string{engine.AnnotationRetainedFor, engine.AnnotationReleasedAt, engine.AnnotationReleaseSeal} {
		if leftHome.Annotations[k] == "" {
			t.Fatalf("left-home's release record lacks %s: %v", k, leftHome.Annotations)
		}
		forged.Annotations[k] = leftHome.Annotations[k]
	}
	if err := k8sClient.Create(ctx, forged); err != nil {
		t.Fatal(err)
	}
	back = newWorkspace(t, ns, "back", keep)
	backHome := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "back-home"}}
	eventually(t, timeout, func() error { return retainedFor(backHome, back.UID) })

	eventually(t, timeout, func() error {
		if err := get(leftHome); err != nil {
			return err
		}
		if leftHome.Annotations[controllers.AnnotationStaleSince] == "" || leftHome.Annotations[controllers.AnnotationDeleteAt] == "" {
			return fmt.Errorf("not reported stale: %v", leftHome.Annotations)
		}
		return eventOn(leftHome, corev1.EventTypeNormal, infrav1alpha1.EventStale, "will be deleted at")
	})
	deleted := leftHome.DeepCopy()
	// No controller manager here removes the claim's protection finalizer: it is deleting.
	eventually(t, timeout, func() error {
		if err := get(leftHome); err != nil || leftHome.DeletionTimestamp == nil {
			return fmt.Errorf("left-home not being deleted (%v)", err)
		}
		return nil
	})
	// The event is sent after the delete, by the recorder's own goroutine.
	eventually(t, timeout, func() error {
		return eventOn(deleted, corev1.EventTypeNormal, infrav1alpha1.EventDeletedStale, "--workspace-delete-stale-after")
	})
	for _, pvc := range []*corev1.PersistentVolumeClaim{backHome, mine, forged} {
		if err := get(pvc); err != nil || pvc.Annotations[controllers.AnnotationStaleSince] != "" {
			t.Errorf("%s: %v, annotations %v; want it kept, not reported", pvc.Name, err, pvc.Annotations)
		}
	}
}
