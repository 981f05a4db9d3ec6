package realnode

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/pkg/workspacev1"
)

// failureDeadline is how soon a workspace whose IDE cannot start must say why.
const failureDeadline = 60 * time.Second

// checkUnpullableWorkspace: create-and-wait for a workspace whose image does not exist answers
// FailedPrecondition naming ImagePullFailed and the image within a minute, not DeadlineExceeded
// at the call's deadline, and leaves nothing behind.
func checkUnpullableWorkspace(t *testing.T, api apiAccess) {
	ensureNamespace(t, workspaceNS)
	c := apiClient(t, api)
	ctx, cancel := bearerContext(api, 5*time.Minute)
	defer cancel()
	image := env["REGISTRY"] + "/no-such-ide:1"
	start := time.Now()
	_, err := c.Create(ctx, &workspacev1.CreateWorkspaceRequest{Wait: true,
		Workspace: &workspacev1.Workspace{Name: "unpullable-ide", Namespace: workspaceNS, Image: image, Storage: "1Gi"}})
	took := time.Since(start)
	t.Logf("create-and-wait answered after %s: %v", took.Round(100*time.Millisecond), err)
	msg := status.Convert(err).Message()
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(msg, infrav1alpha1.ReasonImagePullFailed) || !strings.Contains(msg, image) {
		t.Errorf("create-and-wait: %v; want FailedPrecondition naming %s and the image", err, infrav1alpha1.ReasonImagePullFailed)
	}
	if took > failureDeadline {
		t.Errorf("create-and-wait answered after %s, want within %s", took, failureDeadline)
	}
	waitCreateUndone(t, "unpullable-ide")
}

// checkUnplaceableWorkspace: create-and-wait for a workspace no node has room for (three CPUs;
// each node has two) answers, at the caller's deadline, DeadlineExceeded saying what it waited
// on: Pending, and the scheduler's reason. The failed create leaves nothing behind.
func checkUnplaceableWorkspace(t *testing.T, api apiAccess) {
	ensureNamespace(t, workspaceNS)
	c := apiClient(t, api)
	const deadline = 20 * time.Second
	ctx, cancel := bearerContext(api, deadline)
	defer cancel()
	_, err := c.Create(ctx, &workspacev1.CreateWorkspaceRequest{Wait: true,
		Workspace: &workspacev1.Workspace{Name: "unplaceable-ide", Namespace: workspaceNS, Storage: "1Gi", Cpu: "3", Memory: "512Mi"}})
	t.Logf("create-and-wait with a %s deadline: %v", deadline, err)
	msg := status.Convert(err).Message()
	if status.Code(err) != codes.DeadlineExceeded || !strings.Contains(msg, "it was Pending") || !strings.Contains(msg, "Insufficient cpu") {
		t.Errorf("create-and-wait: %v; want the server's DeadlineExceeded saying the workspace was Pending for want of CPU", err)
	}
	waitCreateUndone(t, "unplaceable-ide")
}

// waitCreateUndone waits until the workspace of a failed create-and-wait is gone.
func waitCreateUndone(t *testing.T, name string) {
	t.Helper()
	ws := &infrav1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Namespace: workspaceNS, Name: name}}
	waitFor(t, time.Minute, "the failed create's workspace gone", func(ctx context.Context) error {
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(ws), ws); client.IgnoreNotFound(err) != nil || err == nil {
			return fmt.Errorf("still there (%v)", err)
		}
		return nil
	})
}

// checkCrashingWorkspace: an IDE whose program exits at once (node refuses an option) is
// Degraded, CrashLoop, with its exit and node's complaint, within a minute; after the
// operator's failed starts (3, the default) it is stopped: no pod, the volume kept,
// status.stoppedReason StartFailed.
func checkCrashingWorkspace(t *testing.T) {
	ctx := context.Background()
	ensureNamespace(t, testNS)
	ws := &infrav1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: "crashing-ide"},
		Spec: infrav1alpha1.WorkspaceSpec{Owner: "real", Storage: infrav1alpha1.WorkspaceStorage{Size: ptr.To(resource.MustParse("1Gi"))},
			Resources: infrav1alpha1.WorkspaceResources{CPU: ptr.To(resource.MustParse("250m")), Memory: ptr.To(resource.MustParse("512Mi"))},
			Env:       infrav1alpha1.EnvVars{{Name: "NODE_OPTIONS", Value: "--no-such-option"}}}}
	if err := k8sClient.Create(ctx, ws); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), ws) })
	start := time.Now()
	// The message quotes node's own words: the container's last log lines are its termination
	// message (FallbackToLogsOnError).
	waitFor(t, failureDeadline, "workspace "+ws.Name+" Degraded, CrashLoop, saying why", degradedFor(ws, infrav1alpha1.ReasonCrashLoop, "--no-such-option is not allowed in NODE_OPTIONS"))
	t.Logf("Degraded after %s: %s", time.Since(start).Round(100*time.Millisecond), ws.Status.Message)
	waitFor(t, 4*time.Minute, "workspace "+ws.Name+" stopped after its failed starts", func(ctx context.Context) error {
		if err := degradedFor(ws, infrav1alpha1.ReasonStartFailed, "after 3 failed starts")(ctx); err != nil {
			return err
		}
		if ws.Status.Phase != infrav1alpha1.WorkspaceStopped || ws.Status.StoppedReason != infrav1alpha1.ReasonStartFailed {
			return fmt.Errorf("phase %s, stoppedReason %q", ws.Status.Phase, ws.Status.StoppedReason)
		}
		return nil
	})
	t.Logf("stopped after %s: %s", time.Since(start).Round(100*time.Millisecond), ws.Status.Message)
	pvc := &corev1.PersistentVolumeClaim{}
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: testNS, Name: ws.Name + "-home"}, pvc); err != nil || pvc.DeletionTimestamp != nil {
		t.Errorf("the stopped workspace's volume: %v", err)
	}
}

// degradedFor checks that ws is Degraded for reason, its message saying want.
func degradedFor(ws *infrav1alpha1.Workspace, reason, want string) func(context.Context) error {
	return func(ctx context.Context) error {
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(ws), ws); err != nil {
			return err
		}
		c := meta.FindStatusCondition(ws.Status.Conditions, infrav1alpha1.ConditionDegraded)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != reason || !strings.Contains(c.Message, want) {
			return fmt.Errorf("phase %s (%s), Degraded %v; want Degraded for %s saying %q", ws.Status.Phase, ws.Status.Message, c, reason, want)
		}
		return nil
	}
}
