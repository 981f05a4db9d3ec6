package e2e

import (
	"context"
	"net/http"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func TestOperatorProbesAnswer(t *testing.T) {
	ctx := context.Background()
	for _, path := range []string{"/healthz", "/readyz"} {
		code, err := operator.Probe(ctx, path)
		if err != nil || code != http.StatusOK {
			t.Errorf("GET %s = %d, %v; want 200", path, code, err)
		}
	}
}

// TestDeploymentPodsRunOnFakeNodes shows the embedded cluster schedules real pods onto its
// fake nodes and that they reach Running, which every later end-to-end test relies on.
func TestDeploymentPodsRunOnFakeNodes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	labels := map[string]string{"app": "e2e-web"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-web", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}},
			},
		},
	}
	if err := k8sClient.Create(ctx, dep); err != nil {
		t.Fatalf("creating deployment: %v", err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), dep) })

	var pods corev1.PodList
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if err := k8sClient.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels(labels)); err != nil {
			return false, err
		}
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(dep), dep); err != nil {
			return false, err
		}
		return countRunning(pods.Items) == 3 && dep.Status.AvailableReplicas == 3, nil
	})
	if err != nil {
		t.Fatalf("waiting for 3 running pods and 3 available replicas: %v (running %d, available %d)",
			err, countRunning(pods.Items), dep.Status.AvailableReplicas)
	}
	for _, p := range pods.Items {
		var node corev1.Node
		if err := k8sClient.Get(ctx, client.ObjectKey{Name: p.Spec.NodeName}, &node); err != nil {
			t.Fatalf("pod %s is on node %q: %v", p.Name, p.Spec.NodeName, err)
		}
		if node.Annotations["kwok.x-k8s.io/node"] != "fake" {
			t.Errorf("pod %s runs on %s, which is not a fake node", p.Name, node.Name)
		}
	}
}

func countRunning(pods []corev1.Pod) int {
	n := 0
	for _, p := range pods {
		if p.Status.Phase == corev1.PodRunning && p.Spec.NodeName != "" {
			n++
		}
	}
	return n
}
