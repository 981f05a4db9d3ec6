package realnode

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/test/infra/realcluster"
)

// checkGenericDaemon runs the test daemon image on the node's "logs" label: its pod really
// runs there and logs, status.installed counts it; a DaemonSet edited or deleted by hand is
// restored; deleting the GenericDaemon removes its pods.
func checkGenericDaemon(t *testing.T) {
	ctx := context.Background()
	gd := &infrav1alpha1.GenericDaemon{
		ObjectMeta: metav1.ObjectMeta{Name: "real-daemon", Namespace: testNS},
		Spec:       infrav1alpha1.GenericDaemonSpec{Image: env["GD_TEST_IMAGE"], Label: "logs"},
	}
	if err := k8sClient.Create(ctx, gd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), gd) })
	pod := waitDaemonRunning(t, gd)
	waitFor(t, time.Minute, "the daemon's output in kubectl logs", func(ctx context.Context) error {
		logs, err := clientset.CoreV1().Pods(testNS).GetLogs(pod.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
		if err != nil || !strings.Contains(string(logs), "test-daemon "+pod.Name) {
			return fmt.Errorf("logs %q: %v", logs, err)
		}
		return nil
	})

	ds := &appsv1.DaemonSet{}
	key := client.ObjectKey{Namespace: testNS, Name: gd.Name}
	if err := k8sClient.Get(ctx, key, ds); err != nil {
		t.Fatal(err)
	}
	edit := client.MergeFrom(ds.DeepCopy())
	ds.Spec.Template.Spec.Containers[0].Image = env["REGISTRY"] + "/busybox:1.35"
	if err := k8sClient.Patch(ctx, ds, edit); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "the DaemonSet's image restored after a hand edit", func(ctx context.Context) error {
		if err := k8sClient.Get(ctx, key, ds); err != nil {
			return err
		}
		if got := ds.Spec.Template.Spec.Containers[0].Image; got != gd.Spec.Image {
			return fmt.Errorf("image %s", got)
		}
		return nil
	})
	uid := ds.UID
	if err := k8sClient.Delete(ctx, ds); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "the DaemonSet recreated after a hand delete", func(ctx context.Context) error {
		if err := k8sClient.Get(ctx, key, ds); err != nil {
			return err
		}
		if ds.UID == uid {
			return fmt.Errorf("still the deleted one")
		}
		return nil
	})
	waitDaemonRunning(t, gd)

	if err := k8sClient.Delete(ctx, gd); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "the GenericDaemon's DaemonSet and pods gone", func(ctx context.Context) error {
		if err := k8sClient.Get(ctx, key, &appsv1.DaemonSet{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("DaemonSet: %v", err)
		}
		if pods := daemonPods(t, ctx, gd.Name); len(pods) > 0 {
			return fmt.Errorf("%d pods left", len(pods))
		}
		return nil
	})
}

// waitDaemonRunning waits until the GenericDaemon is Ready with one node installed and returns
// its pod, Running on the real node.
func waitDaemonRunning(t *testing.T, gd *infrav1alpha1.GenericDaemon) corev1.Pod {
	t.Helper()
	var pod corev1.Pod
	waitFor(t, 2*time.Minute, "GenericDaemon "+gd.Name+" Ready with its pod Running on "+realcluster.NodeName, func(ctx context.Context) error {
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(gd), gd); err != nil {
			return err
		}
		if gd.Status.Installed != 1 || gd.Status.Desired != 1 || !ready(gd.Status.Conditions, gd.Generation) {
			return fmt.Errorf("installed %d of %d, conditions %v", gd.Status.Installed, gd.Status.Desired, gd.Status.Conditions)
		}
		pods := daemonPods(t, ctx, gd.Name)
		if len(pods) != 1 || pods[0].Status.Phase != corev1.PodRunning || pods[0].Spec.NodeName != realcluster.NodeName {
			return fmt.Errorf("pods %v", podStates(pods))
		}
		pod = pods[0]
		return nil
	})
	return pod
}

// daemonPods are the pods of the GenericDaemon's DaemonSet, by their controller.
func daemonPods(t *testing.T, ctx context.Context, name string) []corev1.Pod {
	t.Helper()
	var pods corev1.PodList
	if err := k8sClient.List(ctx, &pods, client.InNamespace(testNS)); err != nil {
		t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range pods.Items {
		if c := metav1.GetControllerOf(&p); c != nil && c.Kind == "DaemonSet" && c.Name == name && p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

func podStates(pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, fmt.Sprintf("%s %s on %q", p.Name, p.Status.Phase, p.Spec.NodeName))
	}
	return out
}

// ready tells whether conditions say Ready for generation.
func ready(conditions []metav1.Condition, generation int64) bool {
	for _, c := range conditions {
		if c.Type == infrav1alpha1.ConditionReady {
			return c.Status == metav1.ConditionTrue && c.ObservedGeneration == generation
		}
	}
	return false
}

// checkUnpullableDaemon: a DaemonSet whose image cannot be pulled only ever says "not ready";
// the GenericDaemon's Degraded condition names the image and the kubelet's reason.
func checkUnpullableDaemon(t *testing.T) {
	ctx := context.Background()
	image := env["REGISTRY"] + "/no-such-daemon:1"
	gd := &infrav1alpha1.GenericDaemon{
		ObjectMeta: metav1.ObjectMeta{Name: "unpullable-daemon", Namespace: testNS},
		Spec:       infrav1alpha1.GenericDaemonSpec{Image: image, Label: "logs"},
	}
	if err := k8sClient.Create(ctx, gd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), gd) })
	waitFor(t, 2*time.Minute, "GenericDaemon "+gd.Name+" Degraded, naming its image", func(ctx context.Context) error {
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(gd), gd); err != nil {
			return err
		}
		c := meta.FindStatusCondition(gd.Status.Conditions, infrav1alpha1.ConditionDegraded)
		if c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("conditions %v", gd.Status.Conditions)
		}
		if !strings.Contains(c.Message, `"`+image+`"`) || !strings.Contains(c.Message, "ImagePull") {
			return fmt.Errorf("Degraded says %q: no image or pull reason", c.Message)
		}
		t.Logf("Degraded: %s", c.Message)
		return nil
	})
}

// checkDaemonOnLabelledNodes follows a GenericDaemon's label across the workers: labelling a
// node brings its pod there (its logs readable), labelling another adds one, removing a label
// takes that node's pod away, a node that joins with the label gets one and takes it along when
// it leaves; status.installed follows each step. The joining node takes no other pod (the
// other lanes' must not land on a node that goes away under them): it registers with a taint
// nothing tolerates and is then cordoned, which a DaemonSet's pods tolerate, as on any cluster.
func checkDaemonOnLabelledNodes(t *testing.T) {
	workers := strings.Fields(env["REAL_CLUSTER_NODES"])[1:]
	if len(workers) < 2 {
		t.Fatalf("REAL_CLUSTER_NODES=%q: two workers needed", env["REAL_CLUSTER_NODES"])
	}
	const key, value = "cloudspace.dev/real-daemon", "on"
	gd := &infrav1alpha1.GenericDaemon{
		ObjectMeta: metav1.ObjectMeta{Name: "labelled-daemon", Namespace: testNS},
		Spec:       infrav1alpha1.GenericDaemonSpec{Image: env["GD_TEST_IMAGE"], Label: key + "=" + value},
	}
	if err := k8sClient.Create(context.Background(), gd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), gd) })
	for _, w := range workers[:2] {
		t.Cleanup(func() { labelNode(t, w, key, nil) })
	}
	waitDaemonOn(t, gd)

	labelNode(t, workers[0], key, ptr.To(value))
	pods := waitDaemonOn(t, gd, workers[0])
	waitFor(t, time.Minute, "the daemon's output in kubectl logs on "+workers[0], func(ctx context.Context) error {
		logs, err := clientset.CoreV1().Pods(testNS).GetLogs(pods[0].Name, &corev1.PodLogOptions{}).DoRaw(ctx)
		if err != nil || !strings.Contains(string(logs), "test-daemon "+pods[0].Name) {
			return fmt.Errorf("logs %q: %v", logs, err)
		}
		return nil
	})
	labelNode(t, workers[1], key, ptr.To(value))
	waitDaemonOn(t, gd, workers[0], workers[1])
	labelNode(t, workers[0], key, nil)
	waitDaemonOn(t, gd, workers[1])

	// A node that joins with the label gets the pod; one that leaves takes it along.
	joining := realcluster.WorkerPrefix + strconv.Itoa(len(workers)+1)
	t.Cleanup(func() {
		if out, err := clusterCmd("node-remove", joining); err != nil {
			t.Errorf("removing node %s: %v\n%s", joining, err, out)
		}
	})
	start := time.Now()
	if out, err := clusterCmd("node-add", joining, key+"="+value, "cloudspace.dev/real-joining=true:NoSchedule"); err != nil {
		t.Fatalf("adding node %s: %v\n%s", joining, err, out)
	}
	// Cordoned and untainted in one write: at no moment can another pod be scheduled there.
	patchNode(t, joining, `{"spec":{"unschedulable":true,"taints":[{"key":"node.kubernetes.io/unschedulable","effect":"NoSchedule"}]}}`)
	t.Logf("node %s joined, Ready with its enforcer: %s", joining, time.Since(start).Round(100*time.Millisecond))
	waitDaemonOn(t, gd, workers[1], joining)
	if out, err := clusterCmd("node-remove", joining); err != nil {
		t.Fatalf("removing node %s: %v\n%s", joining, err, out)
	}
	// The DaemonSet counts the pod of the deleted node until Kubernetes' pod garbage collector
	// deletes it, 40 s after the node (measured: 50-75 s in all).
	waitDaemonOn(t, gd, workers[1])
}

// labelNode sets the node's label, or removes it when value is nil.
func labelNode(t *testing.T, node, key string, value *string) {
	t.Helper()
	v := "null"
	if value != nil {
		v = strconv.Quote(*value)
	}
	patchNode(t, node, fmt.Sprintf(`{"metadata":{"labels":{%q:%s}}}`, key, v))
}

// patchNode applies a merge patch to the node, failing the test (not stopping it) when it is
// refused.
func patchNode(t *testing.T, node, patch string) {
	t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}
	if err := k8sClient.Patch(context.Background(), n, client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
		t.Errorf("patching node %s with %s: %v", node, patch, err)
	}
}

// waitDaemonOn waits until the GenericDaemon's pods run on exactly the nodes given, Ready, with
// status.installed counting them, and returns the pods.
func waitDaemonOn(t *testing.T, gd *infrav1alpha1.GenericDaemon, nodes ...string) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	waitFor(t, 2*time.Minute, fmt.Sprintf("GenericDaemon %s running on %v, status.installed %d", gd.Name, nodes, len(nodes)), func(ctx context.Context) error {
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(gd), gd); err != nil {
			return err
		}
		pods = daemonPods(t, ctx, gd.Name)
		var on []string
		for _, p := range pods {
			if p.Status.Phase != corev1.PodRunning {
				return fmt.Errorf("pods %v", podStates(pods))
			}
			on = append(on, p.Spec.NodeName)
		}
		sort.Strings(on)
		if strings.Join(on, ",") != strings.Join(nodes, ",") || int(gd.Status.Installed) != len(nodes) || int(gd.Status.Desired) != len(nodes) {
			return fmt.Errorf("pods %v, installed %d of %d", podStates(pods), gd.Status.Installed, gd.Status.Desired)
		}
		return nil
	})
	return pods
}
