package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
)

// squatter is an object someone else made where a chart renders a child, and what it looked
// like before the operator saw it.
type squatter struct {
	obj    client.Object
	before []byte
}

// squat creates obj as another user would, and remembers it byte for byte.
func squat(t *testing.T, obj client.Object) squatter {
	t.Helper()
	if err := k8sClient.Create(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return squatter{obj: obj, before: data}
}

// assertUntouched fails unless the object is still there exactly as it was made: same version,
// no owner reference, no label, annotation or field of ours.
func (s squatter) assertUntouched(t *testing.T) {
	t.Helper()
	if err := get(s.obj); err != nil {
		t.Fatalf("%T %s: %v", s.obj, s.obj.GetName(), err)
	}
	after, err := json.Marshal(s.obj)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(s.before, after) {
		t.Errorf("%T %s was changed:\nbefore %s\nafter  %s", s.obj, s.obj.GetName(), s.before, after)
	}
}

// assertOwnershipConflict waits for the conflict to be reported on cr: Ready False, Degraded
// True with reason OwnershipConflict and a message naming every object, and a Warning event.
func assertOwnershipConflict(t *testing.T, cr client.Object, names ...string) {
	t.Helper()
	assertRefused(t, cr, infrav1alpha1.ReasonOwnershipConflict, names...)
}

// assertRefused waits for Ready False and Degraded True with reason and a message naming
// every one of names, and a Warning event of that reason.
func assertRefused(t *testing.T, cr client.Object, reason string, names ...string) {
	t.Helper()
	u := unstructuredOf(t, cr)
	eventually(t, timeout, func() error {
		return hasCondition(u, infrav1alpha1.ConditionDegraded, metav1.ConditionTrue, reason)
	})
	msg := condition(u, infrav1alpha1.ConditionDegraded).Message
	for _, n := range names {
		if !strings.Contains(msg, n) {
			t.Errorf("Degraded message %q does not name %s", msg, n)
		}
	}
	if c := condition(u, infrav1alpha1.ConditionReady); c.Status != metav1.ConditionFalse || c.Reason != reason {
		t.Errorf("Ready = %+v, want False/%s", c, reason)
	}
	eventually(t, timeout, func() error { return warningEvent(cr, reason, names[0]) })
}

func warningEvent(obj client.Object, reason, mentions string) error {
	return eventOn(obj, corev1.EventTypeWarning, reason, mentions)
}

// eventOn finds an event of type for reason on obj whose message mentions mentions.
func eventOn(obj client.Object, typ, reason, mentions string) error {
	var events corev1.EventList
	if err := k8sClient.List(context.Background(), &events, client.InNamespace(obj.GetNamespace())); err != nil {
		return err
	}
	for _, e := range events.Items {
		if e.InvolvedObject.UID == obj.GetUID() && e.Type == typ && e.Reason == reason && strings.Contains(e.Message, mentions) {
			return nil
		}
	}
	return fmt.Errorf("no %s event %s mentioning %q on %s", typ, reason, mentions, obj.GetName())
}

func deleteAndWait(t *testing.T, obj client.Object) {
	t.Helper()
	if err := k8sClient.Delete(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
	eventually(t, timeout, func() error { return gone(obj) })
}

// TestGenericDaemonNeverTakesOverAnotherObject: a ServiceAccount nobody controls and a
// DaemonSet another object controls stand where a GenericDaemon's children would go. The
// operator reports the conflict, writes neither, and leaves both in place when the
// GenericDaemon is deleted.
func TestGenericDaemonNeverTakesOverAnotherObject(t *testing.T) {
	ns := newNamespace(t)
	keeper := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "keeper"}}
	if err := k8sClient.Create(context.Background(), keeper); err != nil {
		t.Fatal(err)
	}
	sa := squat(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "squat", Labels: map[string]string{"team": "other"}}})
	ds := squat(t, otherDaemonSet(ns, "squat", keeper))

	gd := newGenericDaemon(t, ns, "squat", infrav1alpha1.GenericDaemonSpec{Image: "syslog:1", Label: "logs"})
	assertOwnershipConflict(t, gd, "ServiceAccount squat", "DaemonSet squat", "controlled by ConfigMap keeper")
	sa.assertUntouched(t)
	ds.assertUntouched(t)

	deleteAndWait(t, gd)
	sa.assertUntouched(t)
	ds.assertUntouched(t)
}

func otherDaemonSet(ns, name string, controller *corev1.ConfigMap) *appsv1.DaemonSet {
	labels := map[string]string{"app": "other"}
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "v1", Kind: "ConfigMap", Name: controller.Name, UID: controller.UID, Controller: ptr.To(true),
		}}},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "other", Image: "other:1"}}},
			},
		},
	}
}

// TestOwnershipConflictClearsWhenTheObjectGoes: once the other object is removed, the retry
// with back-off creates the child and the conflict clears by itself.
func TestOwnershipConflictClearsWhenTheObjectGoes(t *testing.T) {
	ns := newNamespace(t)
	sa := squat(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "late"}})
	gd := newGenericDaemon(t, ns, "late", infrav1alpha1.GenericDaemonSpec{Image: "syslog:1", Label: "logs"})
	assertOwnershipConflict(t, gd, "ServiceAccount late")
	if err := get(&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "late"}}); err == nil {
		t.Error("a DaemonSet was created while another child's place was taken: a conflict must write nothing")
	}

	if err := k8sClient.Delete(context.Background(), sa.obj); err != nil {
		t.Fatal(err)
	}
	u := unstructuredOf(t, gd)
	eventually(t, timeout, func() error {
		return hasCondition(u, infrav1alpha1.ConditionDegraded, metav1.ConditionFalse, infrav1alpha1.ReasonApplying)
	})
	mine := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "late"}}
	if err := get(mine); err != nil {
		t.Fatal(err)
	}
	assertOwnedAndApplied(t, mine, gd.UID)
}

// TestWorkspaceNeverTakesOverAnotherObject: a Service, a NetworkPolicy and a volume someone
// else made stand where a Workspace's children would go (the volume even carries the
// workspace owner's label, but was never retained by the operator).
func TestWorkspaceNeverTakesOverAnotherObject(t *testing.T) {
	ns := newNamespace(t)
	svc := squat(t, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}})
	np := squat(t, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}})
	pvc := squat(t, otherVolume(ns, "web-home", map[string]string{"infra.cloudspace.dev/owner": "alice"}))

	ws := newWorkspace(t, ns, "web", infrav1alpha1.WorkspaceSpec{Owner: "alice"})
	assertOwnershipConflict(t, ws, "PersistentVolumeClaim web-home", "Service web", "NetworkPolicy web", "not controlled by any resource")
	if err := get(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}); err == nil {
		t.Error("the IDE Deployment was created although other children's places were taken")
	}
	for _, s := range []squatter{svc, np, pvc} {
		s.assertUntouched(t)
	}

	deleteAndWait(t, ws)
	for _, s := range []squatter{svc, np, pvc} {
		s.assertUntouched(t)
	}
}

func otherVolume(ns, name string, labels map[string]string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
}

// TestRetainedVolumeIsNotAdoptedByAnotherUser: bob's volume, kept after his workspace was
// deleted, is not taken by alice's new workspace of the same name: it is Degraded with reason
// VolumeOwnedByAnotherUser, which does not say whose the volume is.
func TestRetainedVolumeIsNotAdoptedByAnotherUser(t *testing.T) {
	ns := newNamespace(t)
	retain := infrav1alpha1.WorkspaceStorage{ReclaimPolicy: infrav1alpha1.ReclaimRetain}
	bobs := newWorkspace(t, ns, "proj", infrav1alpha1.WorkspaceSpec{Owner: "bob", Storage: retain})
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "proj-home"}}
	eventually(t, timeout, func() error { return get(pvc) })
	deleteAndWait(t, bobs)
	kept := squatter{obj: pvc}
	if err := get(pvc); err != nil {
		t.Fatal(err)
	}
	kept.before, _ = json.Marshal(pvc)

	alices := newWorkspace(t, ns, "proj", infrav1alpha1.WorkspaceSpec{Owner: "alice", Storage: retain})
	assertRefused(t, alices, infrav1alpha1.ReasonVolumeOwnedByAnotherUser, "PersistentVolumeClaim proj-home", "belongs to another user")
	u := unstructuredOf(t, alices)
	if err := get(u); err != nil {
		t.Fatal(err)
	}
	if msg := condition(u, infrav1alpha1.ConditionDegraded).Message; strings.Contains(msg, "bob") {
		t.Errorf("the refusal %q tells alice whose volume it is", msg)
	}
	kept.assertUntouched(t)
}
