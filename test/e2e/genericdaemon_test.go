package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/test/framework"
)

// waitFor polls check until it returns nil, failing the test with its last error.
func waitFor(t *testing.T, timeout time.Duration, what string, check func(context.Context) error) {
	t.Helper()
	framework.WaitFor(t, timeout, what, check, func() {
		dumpState(t)
		t.Logf("operator log: %s", operator.LogPath)
	})
}

// dumpState logs what the cluster holds, so that a failure can be understood afterwards.
func dumpState(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	if path, err := operator.DumpGoroutines(ctx); err == nil {
		t.Logf("operator goroutines: %s", path)
	}
	var gds infrav1alpha1.GenericDaemonList
	if err := k8sClient.List(ctx, &gds); err == nil {
		for _, gd := range gds.Items {
			t.Logf("GenericDaemon %s/%s gen %d: %+v", gd.Namespace, gd.Name, gd.Generation, gd.Status)
		}
	}
	var dss appsv1.DaemonSetList
	if err := k8sClient.List(ctx, &dss); err == nil {
		for _, ds := range dss.Items {
			t.Logf("DaemonSet %s/%s gen %d: %+v", ds.Namespace, ds.Name, ds.Generation, ds.Status)
		}
	}
	var pods corev1.PodList
	if err := k8sClient.List(ctx, &pods, client.InNamespace("default")); err == nil {
		for _, p := range pods.Items {
			t.Logf("Pod %s on %q: %s deleting=%v", p.Name, p.Spec.NodeName, p.Status.Phase, p.DeletionTimestamp != nil)
		}
	}
	var nodes corev1.NodeList
	if err := k8sClient.List(ctx, &nodes); err == nil {
		for _, n := range nodes.Items {
			t.Logf("Node %s labels %v", n.Name, n.Labels)
		}
	}
}

func installed(gd *infrav1alpha1.GenericDaemon, want int32) func(context.Context) error {
	return func(ctx context.Context) error {
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(gd), gd); err != nil {
			return err
		}
		ready := meta.FindStatusCondition(gd.Status.Conditions, infrav1alpha1.ConditionReady)
		if gd.Status.Installed != want || gd.Status.Desired != want || ready == nil || ready.Status != metav1.ConditionTrue {
			return fmt.Errorf("installed %d, desired %d, Ready %+v; want %d/%d and Ready", gd.Status.Installed, gd.Status.Desired, ready, want, want)
		}
		return nil
	}
}

func setNodeLabel(t *testing.T, node, key string, value *string) {
	t.Helper()
	v := "null"
	if value != nil {
		v = fmt.Sprintf("%q", *value)
	}
	patch := fmt.Appendf(nil, `{"metadata":{"labels":{%q:%s}}}`, key, v)
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}
	if err := k8sClient.Patch(context.Background(), n, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
}

// TestGenericDaemonFollowsNodeLabels: the daemon runs exactly on the labelled nodes, follows a
// label added and removed, and goes away with its resource.
func TestGenericDaemonFollowsNodeLabels(t *testing.T) {
	gd := &infrav1alpha1.GenericDaemon{
		ObjectMeta: metav1.ObjectMeta{Name: "syslog", Namespace: "default"},
		Spec:       infrav1alpha1.GenericDaemonSpec{Image: "mbessler/syslogdocker", Label: "logs"},
	}
	if err := k8sClient.Create(context.Background(), gd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { setNodeLabel(t, "dev-node-3", "logs", nil) })
	waitFor(t, time.Minute, "two labelled nodes run the daemon", installed(gd, 2))

	yes := "true"
	setNodeLabel(t, "dev-node-3", "logs", &yes)
	waitFor(t, time.Minute, "the newly labelled node runs it too", installed(gd, 3))

	setNodeLabel(t, "dev-node-3", "logs", nil)
	waitFor(t, time.Minute, "the unlabelled node no longer counts", installed(gd, 2))

	if err := k8sClient.Delete(context.Background(), gd); err != nil {
		t.Fatal(err)
	}
	ds := &appsv1.DaemonSet{}
	waitFor(t, time.Minute, "the DaemonSet and the resource are gone", func(ctx context.Context) error {
		err := k8sClient.Get(ctx, client.ObjectKey{Namespace: "default", Name: "syslog"}, ds)
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("DaemonSet: %v", err)
		}
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(gd), gd); !apierrors.IsNotFound(err) {
			return fmt.Errorf("GenericDaemon: %v", err)
		}
		return nil
	})
}
