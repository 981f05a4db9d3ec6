package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/engine"
)

// TestRetainedVolumeSurvivesTheGarbageCollector: a volume kept by reclaimPolicy Retain is not
// deleted by this cluster's real garbage collector, neither on a foreground cascade nor when
// its Workspace disappears without the operator's teardown. The operator is stopped while the
// garbage collector acts, so that only the volume's own metadata can protect it.
func TestRetainedVolumeSurvivesTheGarbageCollector(t *testing.T) {
	ctx := context.Background()
	ns := "retain-e2e"
	if err := k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	retain := infrav1alpha1.WorkspaceSpec{Owner: "dora", Storage: infrav1alpha1.WorkspaceStorage{ReclaimPolicy: infrav1alpha1.ReclaimRetain}}
	cascaded := &infrav1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cascaded"}, Spec: retain}
	orphaned := &infrav1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orphaned"}, Spec: retain}
	for _, ws := range []*infrav1alpha1.Workspace{cascaded, orphaned} {
		if err := k8sClient.Create(ctx, ws); err != nil {
			t.Fatal(err)
		}
		waitFor(t, time.Minute, ws.Name+" running", func(ctx context.Context) error {
			if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(ws), ws); err != nil {
				return err
			}
			if ws.Status.Phase != infrav1alpha1.WorkspaceRunning {
				return fmt.Errorf("phase %s: %s", ws.Status.Phase, ws.Status.Message)
			}
			return nil
		})
	}

	if err := operator.Stop(time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := k8sClient.Delete(ctx, cascaded, client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil {
		t.Fatal(err)
	}
	if err := k8sClient.Delete(ctx, orphaned); err != nil {
		t.Fatal(err)
	}
	// Without its finalizer the workspace is gone at once, and its teardown never runs.
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))
	if err := k8sClient.Patch(ctx, orphaned, patch); err != nil {
		t.Fatal(err)
	}
	for _, ws := range []*infrav1alpha1.Workspace{cascaded, orphaned} {
		dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ws.Name}}
		waitFor(t, time.Minute, "the garbage collector deletes "+ws.Name+"'s Deployment", func(ctx context.Context) error {
			return absent(ctx, dep)
		})
		assertVolumeKept(t, ns, ws.Name+"-home")
	}

	if err := restartOperator(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "the cascaded workspace's teardown", func(ctx context.Context) error { return absent(ctx, cascaded) })
	pvc := assertVolumeKept(t, ns, "cascaded-home")
	if pvc.Labels[engine.LabelManagedBy] != "" || pvc.Annotations[engine.AnnotationRetainedFor] == "" {
		t.Errorf("released volume: labels %v, annotations %v; want no managed-by label and the retained-for record", pvc.Labels, pvc.Annotations)
	}
}

// assertVolumeKept fails unless the volume exists, is not being deleted and has no owner.
func assertVolumeKept(t *testing.T, ns, name string) *corev1.PersistentVolumeClaim {
	t.Helper()
	pvc := &corev1.PersistentVolumeClaim{}
	if err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, pvc); err != nil {
		t.Fatalf("retained volume %s: %v", name, err)
	}
	if pvc.DeletionTimestamp != nil || len(pvc.OwnerReferences) != 0 {
		t.Errorf("retained volume %s: deleting since %v, owners %+v; want it kept and unowned", name, pvc.DeletionTimestamp, pvc.OwnerReferences)
	}
	return pvc
}

func absent(ctx context.Context, obj client.Object) error {
	err := k8sClient.Get(ctx, client.ObjectKeyFromObject(obj), obj)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	return fmt.Errorf("%s still exists (deleting since %v)", obj.GetName(), obj.GetDeletionTimestamp())
}
