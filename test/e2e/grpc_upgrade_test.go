package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/pkg/pb"
	"github.com/cloudspace-dev/cloudspace-operator/pkg/workspacev1"
)

// TestAWorkspaceStoredBeforeTheCRDRefusedItHarmsNoOtherTenant: a Workspace stored while the CRD
// still accepted a value its Go type cannot hold (startTimeout: soon, accepted until the CRD
// gained its CEL rule) is still there after an upgrade, and its author may have named another
// user as its owner. That user's calls must still work, and the Workspace itself must say why
// it does not start.
func TestAWorkspaceStoredBeforeTheCRDRefusedItHarmsNoOtherTenant(t *testing.T) {
	bad := storeUnderOldSchema(t, "stored-soon", map[string]any{"owner": "dave", "startTimeout": "soon"})

	seed := pb.NewCloudIdeServiceClient(apiConn(t))
	const name = "dave-after-upgrade"
	t.Cleanup(func() {
		_, _ = seed.DeleteSpace(as(t, "dave", time.Minute), &pb.QueryOption{Name: name, Namespace: workspaceNS})
	})
	if _, err := seed.CreateSpaceAndWaitForRunning(as(t, "dave", 2*time.Minute), &pb.PodInfo{Name: name, Namespace: workspaceNS}); err != nil {
		t.Fatalf("dave's create-and-wait after the bad Workspace was stored: %v", err)
	}
	list, err := workspacev1.NewWorkspaceServiceClient(apiConn(t)).List(as(t, "dave", time.Minute), &workspacev1.ListWorkspacesRequest{})
	if err != nil {
		t.Fatalf("dave's list: %v", err)
	}
	var names []string
	for _, ws := range list.GetWorkspaces() {
		names = append(names, ws.GetName())
	}
	if strings.Join(names, ",") != name {
		t.Errorf("dave lists %v, want only %s (the Workspace that does not decode is left out)", names, name)
	}
	waitFor(t, time.Minute, "the bad Workspace's Ready condition says ValuesInvalid, naming spec.startTimeout", func(ctx context.Context) error {
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(bad), bad); err != nil {
			return err
		}
		conds, _, _ := unstructured.NestedSlice(bad.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == infrav1alpha1.ConditionReady && m["reason"] == infrav1alpha1.ReasonValuesInvalid &&
				strings.Contains(fmt.Sprint(m["message"]), "spec.startTimeout") {
				return nil
			}
		}
		return fmt.Errorf("conditions %v", conds)
	})
}

// storeUnderOldSchema stores a Workspace with spec as the Workspace CRD accepted it before
// startTimeout had its CEL rule: the rule is taken out of the installed CRD, the Workspace
// created, and the CRD put back as it was. The Workspace is deleted when the test ends.
func storeUnderOldSchema(t *testing.T, name string, spec map[string]any) *unstructured.Unstructured {
	t.Helper()
	ctx := context.Background()
	crd := &unstructured.Unstructured{}
	crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
	key := client.ObjectKey{Name: "workspaces." + infrav1alpha1.GroupVersion.Group}
	if err := k8sClient.Get(ctx, key, crd); err != nil {
		t.Fatal(err)
	}
	current, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	versions := make([]any, len(current))
	for i, v := range current {
		versions[i] = runtime.DeepCopyJSONValue(v)
		unstructured.RemoveNestedField(versions[i].(map[string]any),
			"schema", "openAPIV3Schema", "properties", "spec", "properties", "startTimeout", "x-kubernetes-validations")
	}
	setVersions := func(vs []any) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := k8sClient.Get(ctx, key, crd); err != nil {
				return err
			}
			if err := unstructured.SetNestedSlice(crd.Object, vs, "spec", "versions"); err != nil {
				return err
			}
			return k8sClient.Update(ctx, crd)
		})
	}
	if err := setVersions(versions); err != nil {
		t.Fatalf("taking out the startTimeout rule: %v", err)
	}
	restored := false
	restore := func() {
		if !restored {
			if err := setVersions(current); err != nil {
				t.Errorf("putting the Workspace CRD back: %v", err)
			}
			restored = true
		}
	}
	t.Cleanup(restore)
	ws := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	ws.SetGroupVersionKind(infrav1alpha1.GroupVersion.WithKind("Workspace"))
	ws.SetNamespace(workspaceNS)
	ws.SetName(name)
	// The API server takes a changed CRD in shortly after the update.
	waitFor(t, 30*time.Second, "the old schema to accept "+name, func(ctx context.Context) error {
		return k8sClient.Create(ctx, ws.DeepCopy())
	})
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), ws, client.PropagationPolicy(metav1.DeletePropagationBackground)) })
	restore()
	return ws
}
