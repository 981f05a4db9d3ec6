package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/controllers"
	"github.com/cloudspace-dev/cloudspace-operator/internal/watches"
	"github.com/cloudspace-dev/cloudspace-operator/internal/workspace"
	"github.com/cloudspace-dev/cloudspace-operator/test/framework"
)

// runWithWorkspaceLimits replaces the suite's operator by one that serves ns with limits, as
// an admin restarting the operator with new --workspace-max-* flags would; the suite's
// operator is back after the test.
func runWithWorkspaceLimits(t *testing.T, ns string, limits workspace.Limits) {
	t.Helper()
	runWithWorkspaceConfig(t, ns, func(c *controllers.WorkspaceConfig) { c.Limits = limits })
}

// runWithWorkspaceConfig replaces the suite's operator by one that serves ns with the
// Workspace settings configure makes of the suite's, as an admin restarting the operator with
// other --workspace-* flags would.
func runWithWorkspaceConfig(t *testing.T, ns string, configure func(*controllers.WorkspaceConfig)) {
	t.Helper()
	if err := operator.stop(); err != nil {
		t.Fatal(err)
	}
	var err error
	if operator, err = startWorkspaceOperator(ns, configure); err != nil {
		t.Fatal(err)
	}
}

// startWorkspaceOperator runs the suite's kinds in ns, with the Workspace settings configured.
func startWorkspaceOperator(ns string, configure func(*controllers.WorkspaceConfig)) (*runningManager, error) {
	ws, err := watches.Load(filepath.Join(framework.RepoRoot(), "test", "testdata", "watches.yaml"))
	if err != nil {
		return nil, fmt.Errorf("loading the watches: %w", err)
	}
	kinds := suiteKinds()
	configure(&kinds.Workspace)
	return startConfigured(ws, false, kinds, nil, ns)
}

func replicas(dep *appsv1.Deployment, want int32) func() error {
	return func() error {
		if err := get(dep); err != nil {
			return err
		}
		if dep.Spec.Replicas == nil || *dep.Spec.Replicas != want {
			return fmt.Errorf("replicas %v, want %d", dep.Spec.Replicas, want)
		}
		return nil
	}
}

// TestStopOverALoweredMemoryLimitStops: a workspace runs with 4Gi; the admin lowers the
// memory limit to 2Gi. The workspace keeps its status (a new pod address is still reported);
// its owner's stop scales the IDE to zero, and its phase says Stopping until the pod is gone
// (so the quota counts it as running until then), then Stopped. Starting it again at 4Gi does
// not render: it stays at zero and says why.
func TestStopOverALoweredMemoryLimitStops(t *testing.T) {
	ns := newNamespace(t)
	t.Cleanup(func() { restartManager(t) })
	runWithWorkspaceLimits(t, ns, workspace.DefaultLimits())
	ws := newWorkspace(t, ns, "big", infrav1alpha1.WorkspaceSpec{Owner: "olga",
		Resources: infrav1alpha1.WorkspaceResources{Memory: ptr.To(resource.MustParse("4Gi"))}})
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "big"}}
	eventually(t, timeout, replicas(dep, 1))
	pod := ideReady(t, ws)
	eventually(t, timeout, phase(ws, infrav1alpha1.WorkspaceRunning))

	lowered := workspace.DefaultLimits()
	lowered.Memory = resource.MustParse("2Gi")
	runWithWorkspaceLimits(t, ns, lowered)
	// The pod moves: the status follows it, so the workspace is still reconciled.
	pod.Status.PodIP = "10.1.2.4"
	if err := k8sClient.Status().Update(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	eventually(t, timeout, func() error {
		if err := phase(ws, infrav1alpha1.WorkspaceRunning)(); err != nil {
			return err
		}
		if ws.Status.PodIP != "10.1.2.4" {
			return fmt.Errorf("pod IP %q, want the pod's new 10.1.2.4", ws.Status.PodIP)
		}
		return nil
	})

	setRunning(t, ws, false)
	eventually(t, timeout, replicas(dep, 0))
	eventually(t, timeout, phase(ws, infrav1alpha1.WorkspaceStopping))
	if err := k8sClient.Delete(context.Background(), pod, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	eventually(t, timeout, phase(ws, infrav1alpha1.WorkspaceStopped))

	setRunning(t, ws, true)
	eventually(t, timeout, func() error {
		return hasCondition(unstructuredOf(t, ws), infrav1alpha1.ConditionDegraded, metav1.ConditionTrue, infrav1alpha1.ReasonValuesInvalid)
	})
	if err := replicas(dep, 0)(); err != nil {
		t.Errorf("a start over the lowered limit: %v", err)
	}
}
