package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/pkg/pb"
	"github.com/cloudspace-dev/cloudspace-operator/pkg/workspacev1"
	"github.com/cloudspace-dev/cloudspace-operator/test/framework"
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
	api := workspacev1.NewWorkspaceServiceClient(apiConn(t))
	ref := &workspacev1.WorkspaceRef{Namespace: workspaceNS, Name: bad.GetName()}
	_, err = api.Get(as(t, "dave", time.Minute), ref)
	wantCode(t, err, codes.FailedPrecondition, "spec.startTimeout")
	_, err = api.Get(as(t, "alice", time.Minute), ref)
	wantCode(t, err, codes.NotFound, "workspace "+bad.GetName()+" not found")
	// Its finalizer and status cannot be written (the API server refuses every change to it
	// under the CRD's rule) unless the operator got there before the rule was back: a Warning
	// event says what is wrong either way.
	waitFor(t, time.Minute, "a Warning event on the bad Workspace naming spec.startTimeout", func(ctx context.Context) error {
		var events corev1.EventList
		if err := k8sClient.List(ctx, &events, client.InNamespace(workspaceNS)); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Name == bad.GetName() && e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, "spec.startTimeout") {
				return nil
			}
		}
		return fmt.Errorf("none among %d events", len(events.Items))
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
	t.Cleanup(func() {
		_ = k8sClient.Delete(context.Background(), ws, client.PropagationPolicy(metav1.DeletePropagationBackground))
	})
	restore()
	return ws
}

// TestWorkspaceReadsAreServedFromTheCache: a user's List calls are answered from the operator's
// cache, so a portal that polls costs the cluster nothing. (The API reads Workspaces
// unstructured, which the manager's client would read around its cache, from the API server.)
func TestWorkspaceReadsAreServedFromTheCache(t *testing.T) {
	const calls = 40
	rest := kubernetes.NewForConfigOrDie(cluster.Config).RESTClient()
	reads := func() float64 {
		raw, err := rest.Get().AbsPath("/metrics").DoRaw(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		n, err := framework.SumCounter(raw, "apiserver_request_total", func(l map[string]string) (string, bool) {
			return "", l["resource"] == "workspaces" && (l["verb"] == "GET" || l["verb"] == "LIST")
		})
		if err != nil {
			t.Fatal(err)
		}
		return n[""]
	}
	api := workspacev1.NewWorkspaceServiceClient(apiConn(t))
	before := reads()
	for range calls {
		if _, err := api.List(as(t, "carol", time.Minute), &workspacev1.ListWorkspacesRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	// Others read workspaces meanwhile too (the engine, when its cache lags a write of its own):
	// a few, not one per call.
	if n := reads() - before; n >= calls/2 {
		t.Errorf("%v workspace reads at the API server during %d List calls, want the calls served from the cache", n, calls)
	}
}
