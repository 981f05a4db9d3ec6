package realnode

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/test/framework"
)

// otherWorker is a worker that runs neither the operator (whose pod a drain would move, and
// every test after it would wait for) nor, when one can be found, the cluster's one CoreDNS pod
// (whose loss would cut DNS for the time of the test).
func otherWorker(t *testing.T) string {
	t.Helper()
	operator, dns := map[string]bool{}, map[string]bool{}
	for _, p := range operatorPods(t, context.Background()) {
		operator[p.Spec.NodeName] = true
	}
	var pods corev1.PodList
	if err := k8sClient.List(context.Background(), &pods, client.InNamespace("kube-system"), client.MatchingLabels{"k8s-app": "kube-dns"}); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		dns[p.Spec.NodeName] = true
	}
	var fallback string
	for _, node := range strings.Fields(env["REAL_CLUSTER_NODES"])[1:] {
		switch {
		case !operator[node] && !dns[node]:
			return node
		case !operator[node] && fallback == "":
			fallback = node
		}
	}
	if fallback == "" {
		t.Fatalf("every worker in %q runs the operator", env["REAL_CLUSTER_NODES"])
	}
	return fallback
}

// checkDrain drains the node under a workspace as a platform team does before maintenance
// (--force: operator-sdk's registry pod has no controller, so the suite runs this after the
// upgrade check that needs it): the drain completes, the workspace says it waits for that node (which holds its volume)
// rather than "starting", and once the node is uncordoned it runs there again with its files.
func checkDrain(t *testing.T) {
	node := otherWorker(t)
	ensureNamespace(t, workspaceNS)
	ide := placedWorkspaces(t, node, [2]string{"drained-ide", "alice"})[0]
	kubectlExec(t, "drained-ide", "echo kept > ~/mark")
	t.Cleanup(func() {
		if out, err := kubectl("uncordon", node); err != nil {
			t.Errorf("uncordoning %s: %v\n%s", node, err, out)
		}
	})

	start := time.Now()
	if out, err := kubectl("drain", node, "--ignore-daemonsets", "--delete-emptydir-data", "--force", "--timeout=3m"); err != nil {
		t.Fatalf("kubectl drain %s: %v\n%s", node, err, out)
	}
	t.Logf("kubectl drain %s completed in %s", node, time.Since(start).Round(100*time.Millisecond))
	ws := &infrav1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Namespace: workspaceNS, Name: "drained-ide"}}
	waitFor(t, time.Minute, "the drained workspace Pending, Degraded for NodeUnschedulable naming "+node, func(ctx context.Context) error {
		return degradedOnNode(ctx, ws, infrav1alpha1.WorkspacePending, infrav1alpha1.ReasonNodeUnschedulable, node)
	})
	t.Logf("status: %s", ws.Status.Message)

	if out, err := kubectl("uncordon", node); err != nil {
		t.Fatalf("kubectl uncordon %s: %v\n%s", node, err, out)
	}
	back := runningIDE(t, ws)
	if back.Spec.NodeName != node || back.UID == ide.UID {
		t.Errorf("after the uncordon the IDE runs as %s on %s, want a new pod on %s", back.Name, back.Spec.NodeName, node)
	}
	if got := kubectlExec(t, "drained-ide", "cat ~/mark"); got != "kept\n" {
		t.Errorf("the file written before the drain reads %q", got)
	}
}

// checkLostNode loses the node under a workspace (its kubelet and containerd killed): within
// about a minute the workspace is Failed, Degraded for NodeNotReady naming the node; a new
// workspace meanwhile runs on a healthy node; when the node is back the first runs again, its
// one pod the same, its files intact.
func checkLostNode(t *testing.T) {
	node := otherWorker(t)
	ensureNamespace(t, workspaceNS)
	ide := placedWorkspaces(t, node, [2]string{"stranded-ide", "alice"})[0]
	kubectlExec(t, "stranded-ide", "echo kept > ~/mark")
	restarted := false
	t.Cleanup(func() {
		if restarted {
			return
		}
		if out, err := clusterCmd("node-start", node); err != nil {
			t.Errorf("starting node %s again: %v\n%s", node, err, out)
		}
	})

	if out, err := clusterCmd("node-stop", node); err != nil {
		t.Fatalf("stopping node %s: %v\n%s", node, err, out)
	}
	ws := &infrav1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Namespace: workspaceNS, Name: "stranded-ide"}}
	waitFor(t, 2*time.Minute, "the workspace on the lost node Failed, Degraded for NodeNotReady naming "+node, func(ctx context.Context) error {
		return degradedOnNode(ctx, ws, infrav1alpha1.WorkspaceFailed, infrav1alpha1.ReasonNodeNotReady, node)
	})
	t.Logf("status: %s", ws.Status.Message)

	fresh := placedWorkspaces(t, "", [2]string{"meanwhile-ide", "bob"})[0]
	if fresh.Spec.NodeName == node {
		t.Errorf("a workspace created while %s is lost was scheduled there", node)
	}

	start := time.Now()
	if out, err := clusterCmd("node-start", node); err != nil {
		t.Fatalf("starting node %s again: %v\n%s", node, err, out)
	}
	restarted = true
	back := runningIDE(t, ws)
	t.Logf("Running again %s after the node's kubelet started", time.Since(start).Round(100*time.Millisecond))
	if back.UID != ide.UID {
		t.Errorf("the IDE came back as a new pod %s (was %s)", back.Name, ide.Name)
	}
	if got := kubectlExec(t, "stranded-ide", "cat ~/mark"); got != "kept\n" {
		t.Errorf("the file written before the node was lost reads %q", got)
	}
	if c := meta.FindStatusCondition(ws.Status.Conditions, infrav1alpha1.ConditionDegraded); c != nil && c.Status == metav1.ConditionTrue {
		t.Errorf("still Degraded after the node came back: %s", c.Message)
	}
}

// degradedOnNode checks that the workspace is in phase, Degraded for reason, the message
// naming node.
func degradedOnNode(ctx context.Context, ws *infrav1alpha1.Workspace, phase infrav1alpha1.WorkspacePhase, reason, node string) error {
	if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(ws), ws); err != nil {
		return err
	}
	c := meta.FindStatusCondition(ws.Status.Conditions, infrav1alpha1.ConditionDegraded)
	if ws.Status.Phase != phase || c == nil || c.Status != metav1.ConditionTrue || c.Reason != reason ||
		!strings.Contains(c.Message, node) || !strings.Contains(ws.Status.Message, node) {
		return fmt.Errorf("phase %s (%s), Degraded %v", ws.Status.Phase, ws.Status.Message, c)
	}
	return nil
}

// kubectlCmd is bin/kubectl on the real cluster.
func kubectlCmd(args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(framework.RepoRoot(), "bin", "kubectl"), args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+env["KUBECONFIG"])
	return cmd
}

// kubectl runs bin/kubectl on the real cluster.
func kubectl(args ...string) ([]byte, error) { return kubectlCmd(args...).CombinedOutput() }

// clusterCmd runs bin/realcluster (make test-real builds it) on the cluster's directory.
func clusterCmd(args ...string) ([]byte, error) {
	cmd := exec.Command(filepath.Join(framework.RepoRoot(), "bin", "realcluster"), args...)
	cmd.Dir = framework.RepoRoot()
	cmd.Env = append(os.Environ(), "REAL_CLUSTER_DIR="+env["REAL_CLUSTER_DIR"])
	return cmd.CombinedOutput()
}
