package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
)

// TestGitOpsToolsReadTheStatus: kstatus, which Flux, Argo CD and kpt judge health with, gives
// the verdict a GitOps user expects on real Demos: Current once Ready, InProgress while a
// change's children roll out, Failed at once (not InProgress until a timeout) for each reason a
// spec can never succeed, with that reason, and Terminating while deleting.
func TestGitOpsToolsReadTheStatus(t *testing.T) {
	ns := newTestNamespace(t)
	ctx := context.Background()

	ready := createDemo(t, ns, "ready", nil)
	waitForKstatus(t, ready, kstatus.CurrentStatus, "")

	// A change whose new child does not become current: a claim nobody provisions.
	patchDemo(t, ready, `{"spec":{"claim":true}}`)
	waitForKstatus(t, ready, kstatus.InProgressStatus, infrav1alpha1.ReasonApplying)

	conflict := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "taken-config"}}
	if err := k8sClient.Create(ctx, conflict); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, reason string
		spec         map[string]any
	}{
		{"never-renders", infrav1alpha1.ReasonRenderFailed, map[string]any{"fail": "this chart never renders"}},
		{"bad-values", infrav1alpha1.ReasonValuesInvalid, map[string]any{"greeting": ""}},
		{"taken", infrav1alpha1.ReasonOwnershipConflict, nil},
		// Its name makes a label value the API server refuses on every child.
		{strings.Repeat("x", 64), infrav1alpha1.ReasonApplyFailed, nil},
	} {
		waitForKstatus(t, createDemo(t, ns, tc.name, tc.spec), kstatus.FailedStatus, tc.reason)
	}

	const hold = "test.cloudspace.dev/hold"
	held := createDemo(t, ns, "held", nil)
	waitForKstatus(t, held, kstatus.CurrentStatus, "")
	patchDemo(t, held, fmt.Sprintf(`{"metadata":{"finalizers":[%q,%q]}}`, infrav1alpha1.Finalizer, hold))
	if err := k8sClient.Delete(ctx, held); err != nil {
		t.Fatal(err)
	}
	waitForKstatus(t, held, kstatus.TerminatingStatus, "")
	patchDemo(t, held, `{"metadata":{"finalizers":null}}`)
}

// createDemo creates a Demo with spec added to a valid one.
func createDemo(t *testing.T, ns, name string, spec map[string]any) *unstructured.Unstructured {
	t.Helper()
	d := newDemo(ns, name)
	for k, v := range spec {
		d.Object["spec"].(map[string]any)[k] = v
	}
	if err := k8sClient.Create(context.Background(), d); err != nil {
		t.Fatalf("creating Demo %s: %v", name, err)
	}
	return d
}

func patchDemo(t *testing.T, d *unstructured.Unstructured, patch string) {
	t.Helper()
	if err := k8sClient.Patch(context.Background(), d, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("patching Demo %s: %v", d.GetName(), err)
	}
}

// waitForKstatus waits until kstatus computes want for the Demo, with reason (when set) as
// the reason of the condition it read.
func waitForKstatus(t *testing.T, d *unstructured.Unstructured, want kstatus.Status, reason string) {
	t.Helper()
	waitFor(t, time.Minute, fmt.Sprintf("kstatus %s (%s) for Demo %s", want, reason, d.GetName()), func(ctx context.Context) error {
		live := d.DeepCopy()
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(d), live); err != nil {
			return err
		}
		res, err := kstatus.Compute(live)
		if err != nil {
			return err
		}
		if res.Status != want {
			return fmt.Errorf("kstatus %s: %s", res.Status, res.Message)
		}
		// A resource the operator has not yet written status to is Current to kstatus too.
		if observed, _, _ := unstructured.NestedInt64(live.Object, "status", "observedGeneration"); want == kstatus.CurrentStatus && observed != live.GetGeneration() {
			return fmt.Errorf("status.observedGeneration %d, generation %d", observed, live.GetGeneration())
		}
		if reason != "" && (len(res.Conditions) != 1 || res.Conditions[0].Reason != reason) {
			return fmt.Errorf("kstatus %s read %+v, want reason %s", res.Status, res.Conditions, reason)
		}
		return nil
	})
}
