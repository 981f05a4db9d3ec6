package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/engine"
)

func newWorkspace(t *testing.T, ns, name string, spec infrav1alpha1.WorkspaceSpec) *infrav1alpha1.Workspace {
	t.Helper()
	ws := &infrav1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}
	if err := k8sClient.Create(context.Background(), ws); err != nil {
		t.Fatal(err)
	}
	return ws
}

func phase(ws *infrav1alpha1.Workspace, want infrav1alpha1.WorkspacePhase) func() error {
	return func() error {
		if err := get(ws); err != nil {
			return err
		}
		if ws.Status.Phase != want {
			return fmt.Errorf("phase %q (%s), want %s", ws.Status.Phase, ws.Status.Message, want)
		}
		return nil
	}
}

// ideReady plays the part of the Deployment's pod, which envtest has no controllers to create:
// a pod with the IDE's labels, scheduled and ready.
func ideReady(t *testing.T, ws *infrav1alpha1.Workspace) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ws.Namespace, GenerateName: ws.Name + "-ide-", Labels: map[string]string{
			engine.LabelName: "workspace", engine.LabelInstance: ws.Name, engine.LabelManagedBy: engine.ManagedByValue,
		}},
		Spec: corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "ide", Image: ws.Spec.Image}}},
	}
	if err := k8sClient.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.1.2.3", Conditions: []corev1.PodCondition{
		{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()},
	}}
	if err := k8sClient.Status().Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestWorkspaceLifecycle: children applied; start → Running with node, address and URL;
// stop → replicas 0, storage kept, Stopped; start again; delete removes the storage (Delete).
func TestWorkspaceLifecycle(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	ws := newWorkspace(t, ns, "alice-go", infrav1alpha1.WorkspaceSpec{Owner: "alice", Ingress: &infrav1alpha1.WorkspaceIngress{Host: "alice.ide.example.com"}})
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "alice-go"}}
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "alice-go-home"}}
	children := []client.Object{dep, pvc,
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "alice-go"}},
		&networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "alice-go"}},
		&networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "alice-go"}},
	}
	eventually(t, timeout, phase(ws, infrav1alpha1.WorkspacePending))
	for _, c := range children {
		if err := get(c); err != nil {
			t.Fatalf("child %T %s: %v", c, c.GetName(), err)
		}
		assertOwnedAndApplied(t, c, ws.UID)
	}
	if *dep.Spec.Replicas != 1 || dep.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Errorf("deployment replicas %d strategy %s, want 1 and Recreate", *dep.Spec.Replicas, dep.Spec.Strategy.Type)
	}
	if c := dep.Spec.Template.Spec.Containers[0]; c.Image != "codercom/code-server:4.96.4" || c.ImagePullPolicy != corev1.PullIfNotPresent {
		t.Errorf("container image %s pull %s, want the default image and IfNotPresent", c.Image, c.ImagePullPolicy)
	}

	pod := ideReady(t, ws)
	eventually(t, timeout, phase(ws, infrav1alpha1.WorkspaceRunning))
	if ws.Status.NodeName != "node-a" || ws.Status.PodIP != "10.1.2.3" || ws.Status.Port != 8080 || ws.Status.URL != "https://alice.ide.example.com/" || ws.Status.StartedAt == nil {
		t.Errorf("running status = %+v", ws.Status)
	}

	setRunning(t, ws, false)
	eventually(t, timeout, func() error {
		if err := get(dep); err != nil {
			return err
		}
		if *dep.Spec.Replicas != 0 {
			return fmt.Errorf("replicas %d, want 0", *dep.Spec.Replicas)
		}
		return nil
	})
	eventually(t, timeout, phase(ws, infrav1alpha1.WorkspaceStopping))
	// No kubelet finishes a graceful delete here: remove the pod at once, as one would on exit.
	if err := k8sClient.Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	eventually(t, timeout, phase(ws, infrav1alpha1.WorkspaceStopped))
	if err := get(pvc); err != nil || !pvc.DeletionTimestamp.IsZero() {
		t.Fatalf("stopping touched the storage: %v", err)
	}
	if ws.Status.NodeName != "" || ws.Status.PodIP != "" {
		t.Errorf("a stopped workspace still reports node %q, IP %q", ws.Status.NodeName, ws.Status.PodIP)
	}

	setRunning(t, ws, true)
	ideReady(t, ws)
	eventually(t, timeout, phase(ws, infrav1alpha1.WorkspaceRunning))

	if err := k8sClient.Delete(ctx, ws); err != nil {
		t.Fatal(err)
	}
	releaseProtection(t, pvc)
	for _, obj := range append(children, ws) {
		eventually(t, timeout, func() error { return gone(obj) })
	}
}

// releaseProtection waits until the PVC is marked deleted and then does what the controller
// manager's pvc-protection controller would once no pod uses it: drop its finalizer.
func releaseProtection(t *testing.T, pvc *corev1.PersistentVolumeClaim) {
	t.Helper()
	eventually(t, timeout, func() error {
		if err := get(pvc); err != nil {
			return err
		}
		if pvc.DeletionTimestamp.IsZero() {
			return fmt.Errorf("PVC %s is not being deleted", pvc.Name)
		}
		return nil
	})
	patch := []byte(`{"metadata":{"finalizers":null}}`)
	if err := k8sClient.Patch(context.Background(), pvc, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
}

func setRunning(t *testing.T, ws *infrav1alpha1.Workspace, running bool) {
	t.Helper()
	patch := fmt.Appendf(nil, `{"spec":{"running":%t}}`, running)
	if err := k8sClient.Patch(context.Background(), ws, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
}

// TestWorkspaceRetainKeepsStorageForAdoption: with Retain, the volume never has an owner
// reference (the garbage collector could delete it otherwise) but is recorded as the
// workspace's; delete leaves it in place; a new workspace of the same name and owner adopts it.
func TestWorkspaceRetainKeepsStorageForAdoption(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	spec := infrav1alpha1.WorkspaceSpec{Owner: "bob", Storage: infrav1alpha1.WorkspaceStorage{ReclaimPolicy: infrav1alpha1.ReclaimRetain}}
	ws := newWorkspace(t, ns, "bob-web", spec)
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bob-web-home"}}
	eventually(t, timeout, func() error { return retainedFor(pvc, ws.UID) })
	if err := k8sClient.Delete(ctx, ws); err != nil {
		t.Fatal(err)
	}
	eventually(t, timeout, func() error { return gone(ws) })
	if err := get(pvc); err != nil {
		t.Fatalf("Retain deleted the PVC: %v", err)
	}
	if refs := pvc.GetOwnerReferences(); len(refs) != 0 || pvc.Labels[engine.LabelInstance] != "bob-web" || pvc.Labels[engine.LabelManagedBy] != "" {
		t.Errorf("retained PVC: owners %+v, labels %v; want no owner, the instance label and no managed-by", refs, pvc.Labels)
	}
	again := newWorkspace(t, ns, "bob-web", spec)
	eventually(t, timeout, func() error { return retainedFor(pvc, again.UID) })
	if pvc.Labels[engine.LabelManagedBy] != engine.ManagedByValue {
		t.Errorf("adopted PVC labels %v, want managed-by again", pvc.Labels)
	}
}

// retainedFor checks that a retained child has no owner reference and is recorded as uid's.
func retainedFor(obj client.Object, uid types.UID) error {
	if err := get(obj); err != nil {
		return err
	}
	if refs := obj.GetOwnerReferences(); len(refs) != 0 {
		return fmt.Errorf("%s has owner references %+v; a retained child must have none", obj.GetName(), refs)
	}
	if v := obj.GetAnnotations()[engine.AnnotationRetainedFor]; !strings.HasSuffix(v, "/"+string(uid)) {
		return fmt.Errorf("%s is retained for %q, want workspace %s", obj.GetName(), v, uid)
	}
	return nil
}

// TestWorkspaceStartTimeout: an IDE that never becomes ready fails with the reason.
func TestWorkspaceStartTimeout(t *testing.T) {
	ns := newNamespace(t)
	ws := newWorkspace(t, ns, "slow", infrav1alpha1.WorkspaceSpec{Owner: "carol", StartTimeout: &metav1.Duration{Duration: 2 * time.Second}})
	eventually(t, timeout, phase(ws, infrav1alpha1.WorkspaceFailed))
	if want := "did not become ready within 2s"; !strings.Contains(ws.Status.Message, want) {
		t.Errorf("message %q does not say %q", ws.Status.Message, want)
	}
}

// TestWorkspaceDefaultsAndValidation: the API server fills the defaults and rejects bad specs
// with the field path.
func TestWorkspaceDefaultsAndValidation(t *testing.T) {
	ns := newNamespace(t)
	ws := newWorkspace(t, ns, "defaults", infrav1alpha1.WorkspaceSpec{Owner: "dave"})
	if ws.Spec.Port != 8080 || ws.Spec.Running == nil || !*ws.Spec.Running || ws.Spec.Image == "" ||
		ws.Spec.Storage.ReclaimPolicy != infrav1alpha1.ReclaimDelete || ws.Spec.StartTimeout.Duration != 5*time.Minute || ws.Spec.Resources.Memory.String() != "2Gi" {
		t.Errorf("defaults not applied: %+v", ws.Spec)
	}
	bad := []struct {
		spec  infrav1alpha1.WorkspaceSpec
		field string
	}{
		{infrav1alpha1.WorkspaceSpec{}, "spec.owner"},
		{infrav1alpha1.WorkspaceSpec{Owner: "Eve!"}, "spec.owner"},
		{infrav1alpha1.WorkspaceSpec{Owner: "eve", Port: 80}, "spec.port"},
		{infrav1alpha1.WorkspaceSpec{Owner: "eve", Git: &infrav1alpha1.WorkspaceGit{URL: "file:///etc"}}, "spec.git.url"},
		{infrav1alpha1.WorkspaceSpec{Owner: "eve", Storage: infrav1alpha1.WorkspaceStorage{ReclaimPolicy: "Recycle"}}, "spec.storage.reclaimPolicy"},
		{infrav1alpha1.WorkspaceSpec{Owner: "eve", Env: []corev1.EnvVar{{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{
			SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "db"}, Key: "password"}}}}}, "spec.env"},
	}
	for i, b := range bad {
		err := k8sClient.Create(context.Background(), &infrav1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("bad-%d", i)}, Spec: b.spec})
		if err == nil || !strings.Contains(err.Error(), b.field) {
			t.Errorf("spec %+v: error %v, want one naming %s", b.spec, err, b.field)
		}
	}
	patch := []byte(`{"spec":{"owner":"mallory"}}`)
	if err := k8sClient.Patch(context.Background(), ws, client.RawPatch(types.MergePatchType, patch)); err == nil || !strings.Contains(err.Error(), "owner is immutable") {
		t.Errorf("changing the owner: %v, want it refused", err)
	}
}

// TestStopStopsEvenWhenAnotherChildFails: a stop that comes with a change another child
// refuses (a volume cannot shrink) still scales the IDE to zero, and the failure is reported.
func TestStopStopsEvenWhenAnotherChildFails(t *testing.T) {
	ns := newNamespace(t)
	ws := newWorkspace(t, ns, "stubborn", infrav1alpha1.WorkspaceSpec{Owner: "frank"})
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "stubborn"}}
	eventually(t, timeout, func() error { return get(dep) })
	patch := []byte(`{"spec":{"running":false,"storage":{"size":"1Gi"}}}`)
	if err := k8sClient.Patch(context.Background(), ws, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	eventually(t, timeout, func() error {
		if err := get(dep); err != nil {
			return err
		}
		if *dep.Spec.Replicas != 0 {
			return fmt.Errorf("IDE replicas %d after stop, want 0", *dep.Spec.Replicas)
		}
		return nil
	})
	u := unstructuredOf(t, ws)
	eventually(t, timeout, func() error {
		return hasCondition(u, infrav1alpha1.ConditionDegraded, metav1.ConditionTrue, infrav1alpha1.ReasonApplyFailed)
	})
	if msg := condition(u, infrav1alpha1.ConditionDegraded).Message; !strings.Contains(msg, "PersistentVolumeClaim stubborn-home") {
		t.Errorf("Degraded message %q does not name the volume that failed", msg)
	}
}

// TestWorkspaceOverTheLimitsNeverRenders: a workspace within the CRD's ceilings but over the
// operator's limits (here the defaults: 8 CPUs) is ValuesInvalid naming the field, and
// nothing is written for it.
func TestWorkspaceOverTheLimitsNeverRenders(t *testing.T) {
	ns := newNamespace(t)
	cpu := resource.MustParse("16")
	ws := newWorkspace(t, ns, "greedy", infrav1alpha1.WorkspaceSpec{Owner: "ivy", Resources: infrav1alpha1.WorkspaceResources{CPU: &cpu}})
	u := unstructuredOf(t, ws)
	eventually(t, timeout, func() error {
		return hasCondition(u, infrav1alpha1.ConditionDegraded, metav1.ConditionTrue, infrav1alpha1.ReasonValuesInvalid)
	})
	if msg := condition(u, infrav1alpha1.ConditionDegraded).Message; !strings.Contains(msg, "spec.resources.cpu") {
		t.Errorf("Degraded message %q does not name spec.resources.cpu", msg)
	}
	for _, child := range []client.Object{
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "greedy"}},
		&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "greedy-home"}},
	} {
		if err := get(child); err == nil {
			t.Errorf("%T %s was written for a workspace over the limits", child, child.GetName())
		}
	}
}
