package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/cloudspace-dev/cloudspace-operator/test/framework"
)

// eventually polls check until it returns nil, failing the test with its last error at the deadline.
func eventually(t *testing.T, timeout time.Duration, check func() error) {
	t.Helper()
	framework.WaitFor(t, timeout, "the condition", func(context.Context) error { return check() })
}

// consistently fails t as soon as check fails within d: what must not happen, watched for d.
func consistently(t *testing.T, d time.Duration, check func() error) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if err := check(); err != nil {
			t.Fatal(err)
		}
	}
}

// newNamespace creates a namespace for one test and deletes it afterwards.
func newNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "it-"}}
	if err := k8sClient.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), ns) })
	return ns.Name
}

func newDemo(ns, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(framework.DemoGVK)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// get reads obj fresh from the API server (not a cache).
func get(obj client.Object) error {
	return k8sClient.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)
}

func gone(obj client.Object) error {
	err := get(obj)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	return fmt.Errorf("%T %s still exists", obj, obj.GetName())
}

// condition returns the named condition of an unstructured object's status.
func condition(u *unstructured.Unstructured, condType string) *metav1.Condition {
	var st struct {
		Conditions []metav1.Condition `json:"conditions"`
	}
	raw, _, _ := unstructured.NestedMap(u.Object, "status")
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &st); err != nil {
		return nil
	}
	return meta.FindStatusCondition(st.Conditions, condType)
}

func hasCondition(u *unstructured.Unstructured, condType string, status metav1.ConditionStatus, reason string) error {
	if err := get(u); err != nil {
		return err
	}
	c := condition(u, condType)
	if c == nil || c.Status != status || c.Reason != reason {
		return fmt.Errorf("condition %s = %+v, want %s/%s", condType, c, status, reason)
	}
	return nil
}

// unstructuredOf is a typed object as an unstructured one of the same kind and key, to read
// its conditions with hasCondition.
func unstructuredOf(t *testing.T, obj client.Object) *unstructured.Unstructured {
	t.Helper()
	gvk, err := apiutil.GVKForObject(obj, k8sClient.Scheme())
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(obj.GetNamespace())
	u.SetName(obj.GetName())
	return u
}
