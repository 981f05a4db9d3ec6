package realnode

import (
	"context"
	"errors"
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
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/pkg/workspacev1"
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

// checkDrain drains the node under a workspace and the suite's VM as a platform team does
// before maintenance (--force: operator-sdk's registry pod has no controller; the suite keeps it
// off that node): the drain completes, the VM's guest powered off cleanly (ACPI), and both say
// they wait for that node (which holds their volumes) rather than "starting". The VM is then
// halted; once the node is uncordoned the workspace runs there again with its files, and the
// VM, set to Always, boots there with the file in its home. Never do two pods hold the
// workspace's ReadWriteOnce volume at once.
func checkDrain(t *testing.T, node string, rv *realVM) {
	ensureNamespace(t, workspaceNS)
	ide := placedWorkspaces(t, node, [2]string{"drained-ide", "alice"})[0]
	kubectlExec(t, "drained-ide", "echo kept > ~/mark")
	t.Cleanup(func() {
		if out, err := kubectl("uncordon", node); err != nil {
			t.Errorf("uncordoning %s: %v\n%s", node, err, out)
		}
	})
	holders := watchClaimHolders(t, workspaceNS, "drained-ide-home")
	console := followLogs(t, rv.Namespace, rv.Name+"-launcher", "launcher")
	start := time.Now()
	if out, err := kubectl("drain", node, "--ignore-daemonsets", "--delete-emptydir-data", "--force", "--timeout=3m"); err != nil {
		t.Fatalf("kubectl drain %s: %v\n%s", node, err, out)
	}
	t.Logf("kubectl drain %s completed in %s", node, time.Since(start).Round(100*time.Millisecond))
	if out := console(); !strings.Contains(out, "reboot: Power down") {
		t.Errorf("the VM's console shows no clean power-off; its end:\n%s", tail(out, 15))
	} else {
		t.Logf("the VM's console ends:\n%s", tail(out, 3))
	}
	ws := &infrav1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Namespace: workspaceNS, Name: "drained-ide"}}
	waitFor(t, time.Minute, "the drained workspace Pending and VM Scheduling, Degraded for NodeUnschedulable naming "+node, func(ctx context.Context) error {
		return errors.Join(degradedOnNode(ctx, ws, string(infrav1alpha1.WorkspacePending), infrav1alpha1.ReasonNodeUnschedulable, node),
			degradedOnNode(ctx, rv.VirtualMachine, string(infrav1alpha1.VMScheduling), infrav1alpha1.ReasonNodeUnschedulable, node))
	})
	t.Logf("workspace: %s; VM: %s", ws.Status.Message, rv.Status.Message)
	haltVM(t, rv.VirtualMachine, vmClaim(t, rv.VirtualMachine, "disk"), vmClaim(t, rv.VirtualMachine, "root"))

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
	if most, when := holders(); most != 1 {
		t.Errorf("%d pods held the ReadWriteOnce volume at once (%s), want one at a time", most, when)
	}
	// Halted, then Always: the guest boots from its own root disk, the home as it was.
	setRunStrategy(t, rv.VirtualMachine, infrav1alpha1.RunAlways)
	waitVMRunning(t, rv.VirtualMachine)
	checkHomeKept(t, rv, "a drain and a Halted/Always cycle")
}

// followLogs follows a container's log (kubectl logs -f) until the returned function is
// called, which returns what it read.
func followLogs(t *testing.T, ns, pod, container string) func() string {
	t.Helper()
	var out strings.Builder
	cmd := kubectlCmd("logs", "-f", "--tail=0", "-n", ns, pod, "-c", container)
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	stop := func() string {
		select {
		case <-done: // the container ended
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		return out.String()
	}
	t.Cleanup(func() { stop() })
	return stop
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// watchClaimHolders watches the pods in ns that mount claim, until the returned function is
// called: it returns the most that held it at once and the pods at that moment. A pod holds it
// from when it is scheduled (the kubelet mounts volumes only then) until it is gone or has
// ended; one being deleted still runs. An evicted pod's replacement, made at once, holds
// nothing while it waits to be scheduled.
func watchClaimHolders(t *testing.T, ns, claim string) func() (int, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := clientset.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	most, when := 0, ""
	go func() {
		defer close(done)
		holding := map[string]bool{}
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok || !mounts(pod, claim) {
				continue
			}
			ended := pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
			holding[pod.Name] = ev.Type != watch.Deleted && !ended && pod.Spec.NodeName != ""
			var names []string
			for name, holds := range holding {
				if holds {
					names = append(names, name)
				}
			}
			if len(names) > most {
				most, when = len(names), strings.Join(names, ", ")
			}
		}
	}()
	stop := func() (int, string) {
		cancel()
		w.Stop()
		<-done
		return most, when
	}
	t.Cleanup(func() { stop() })
	return stop
}

// mounts reports whether the pod has a volume of claim.
func mounts(pod *corev1.Pod, claim string) bool {
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == claim {
			return true
		}
	}
	return false
}

// checkLostNode loses the node under a workspace and the suite's VM (its kubelet and
// containerd killed): within about a minute both are Failed, Degraded for NodeNotReady naming
// the node, and the workspace API's Get and Watch say so; a new workspace meanwhile runs on a
// healthy node; when the node is back both run again, their pods the same (the guest ran on),
// the workspace's files intact.
func checkLostNode(t *testing.T, node string, rv *realVM, api apiAccess) {
	ensureNamespace(t, workspaceNS)
	ide := placedWorkspaces(t, node, [2]string{"stranded-ide", "alice"})[0]
	c := apiClient(t, api)
	ctx, cancel := bearerContext(api, 10*time.Minute)
	defer cancel()
	events := watchWorkspaces(t, ctx, c)
	kubectlExec(t, "stranded-ide", "echo kept > ~/mark")
	launcher := launcherPod(t, rv.VirtualMachine)
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
	waitFor(t, 2*time.Minute, "the workspace and the VM on the lost node Failed, Degraded for NodeNotReady naming "+node, func(ctx context.Context) error {
		return errors.Join(degradedOnNode(ctx, ws, string(infrav1alpha1.WorkspaceFailed), infrav1alpha1.ReasonNodeNotReady, node),
			degradedOnNode(ctx, rv.VirtualMachine, string(infrav1alpha1.VMFailed), infrav1alpha1.ReasonNodeNotReady, node))
	})
	t.Logf("workspace: %s; VM: %s", ws.Status.Message, rv.Status.Message)
	checkAPISaysLost(t, ctx, c, events, node)

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
	waitVMRunning(t, rv.VirtualMachine)
	if now := launcherPod(t, rv.VirtualMachine); now.UID != launcher.UID {
		t.Errorf("the VM came back in a new launcher pod (%s), want the same, its guest running on", now.UID)
	}
	t.Logf("the VM Running again %s after the node's kubelet started; its guest: %s", time.Since(start).Round(100*time.Millisecond),
		strings.TrimSpace(vmSSH(t, rv.VirtualMachine, rv.key, "uptime -p")))
}

// checkAPISaysLost: the workspace API's Get and Watch of the stranded workspace say it is
// Failed, naming the lost node.
func checkAPISaysLost(t *testing.T, ctx context.Context, c workspacev1.WorkspaceServiceClient, events <-chan *workspacev1.WorkspaceEvent, node string) {
	t.Helper()
	got, err := c.Get(ctx, &workspacev1.WorkspaceRef{Namespace: workspaceNS, Name: "stranded-ide"})
	if err != nil || got.GetPhase() != string(infrav1alpha1.WorkspaceFailed) || !strings.Contains(got.GetMessage(), node) {
		t.Errorf("Get: %s %q (%v); want Failed naming %s", got.GetPhase(), got.GetMessage(), err, node)
	}
	for deadline := time.After(time.Minute); ; {
		select {
		case e, ok := <-events:
			if !ok {
				t.Fatal("the Watch stream ended")
			}
			if ws := e.GetWorkspace(); ws.GetName() == "stranded-ide" && ws.GetPhase() == string(infrav1alpha1.WorkspaceFailed) && strings.Contains(ws.GetMessage(), node) {
				t.Logf("Get and Watch: %s", ws.GetMessage())
				return
			}
		case <-deadline:
			t.Fatalf("no Watch event of stranded-ide Failed naming %s within a minute", node)
		}
	}
}

// degradedOnNode checks that the Workspace or VirtualMachine is in phase, Degraded for reason,
// its message naming node.
func degradedOnNode(ctx context.Context, o client.Object, phase, reason, node string) error {
	if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
		return err
	}
	got, message, conds := statusOf(o)
	c := meta.FindStatusCondition(conds, infrav1alpha1.ConditionDegraded)
	if got != phase || c == nil || c.Status != metav1.ConditionTrue || c.Reason != reason ||
		!strings.Contains(c.Message, node) || !strings.Contains(message, node) {
		return fmt.Errorf("%s: phase %s (%s), Degraded %v", o.GetName(), got, message, c)
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
