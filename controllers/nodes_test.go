package controllers

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/engine"
)

func testNode(name string, ready corev1.ConditionStatus, cordoned bool) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{Unschedulable: cordoned},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready,
			Reason: "NodeStatusUnknown", Message: "Kubelet stopped posting node status.", LastTransitionTime: metav1.NewTime(t0)}}}}
}

func claimOn(node string) *unstructured.Unstructured {
	c := &unstructured.Unstructured{}
	c.SetKind("PersistentVolumeClaim")
	c.SetName("alice-go-home")
	c.SetAnnotations(map[string]string{engine.SelectedNodeAnnotation: node})
	return c
}

func TestNodeProblem(t *testing.T) {
	unscheduled := pod("", corev1.PodPending, false, "")
	unscheduled.Status.Conditions = append(unscheduled.Status.Conditions, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Message: "0/3 nodes are available: 1 node(s) were unschedulable, 2 node(s) didn't match PersistentVolume's node affinity. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."})
	older := pod("", corev1.PodPending, false, "")
	older.Status.Conditions = append(older.Status.Conditions, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Message: "0/3 nodes are available: 1 node(s) were unschedulable, 2 node(s) had volume node affinity conflict."})
	elsewhere := pod("", corev1.PodPending, false, "")
	elsewhere.Status.Conditions = append(elsewhere.Status.Conditions, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Message: "0/3 nodes are available: 3 Insufficient cpu."})
	evicted := pod("n1", corev1.PodRunning, false, "")
	evicted.DeletionTimestamp = &metav1.Time{Time: t0}
	cases := []struct {
		name    string
		pods    []corev1.Pod
		nodes   map[string]*corev1.Node
		reason  string
		waiting bool
		says    string
	}{
		{"a ready pod: nothing to say", []corev1.Pod{pod("n1", corev1.PodRunning, true, "")},
			map[string]*corev1.Node{"n1": testNode("n1", corev1.ConditionUnknown, false)}, "", false, ""},
		{"a pod on a lost node", []corev1.Pod{pod("n1", corev1.PodRunning, false, "")},
			map[string]*corev1.Node{"n1": testNode("n1", corev1.ConditionUnknown, false)}, infrav1alpha1.ReasonNodeNotReady, false,
			"node n1, which runs the IDE, has not been ready since 2026-11-21T10:00:00Z (NodeStatusUnknown); it runs again"},
		{"a pod evicted from a lost node, which stays until the node is back", []corev1.Pod{evicted},
			map[string]*corev1.Node{"n1": testNode("n1", corev1.ConditionUnknown, false)}, infrav1alpha1.ReasonNodeNotReady, false, "node n1, which runs the IDE"},
		{"a pod on a node that is gone", []corev1.Pod{pod("n1", corev1.PodRunning, false, "")}, map[string]*corev1.Node{}, infrav1alpha1.ReasonNodeNotReady, false,
			"node n1, which runs the IDE, no longer exists"},
		{"nothing known of the nodes: nothing to say", []corev1.Pod{pod("n1", corev1.PodRunning, false, "")}, nil, "", false, ""},
		{"a pod evicted from a lost node beside its replacement: the replacement counts", []corev1.Pod{evicted, unscheduled},
			map[string]*corev1.Node{"n1": testNode("n1", corev1.ConditionUnknown, false), "n2": testNode("n2", corev1.ConditionTrue, true)},
			infrav1alpha1.ReasonNodeUnschedulable, true, "waiting for node n2"},
		{"the scheduler's words before 1.24", []corev1.Pod{older},
			map[string]*corev1.Node{"n2": testNode("n2", corev1.ConditionTrue, true)}, infrav1alpha1.ReasonNodeUnschedulable, true, "waiting for node n2"},
		{"a pod that fits nowhere for CPU: the cordoned volume node is not why", []corev1.Pod{elsewhere},
			map[string]*corev1.Node{"n2": testNode("n2", corev1.ConditionTrue, true)}, "", false, ""},
		{"a pod not ready on a ready node: its own reasons say why", []corev1.Pod{pod("n1", corev1.PodRunning, false, "")},
			map[string]*corev1.Node{"n1": testNode("n1", corev1.ConditionTrue, false)}, "", false, ""},
		{"a pod waiting for its volume's cordoned node", []corev1.Pod{unscheduled},
			map[string]*corev1.Node{"n2": testNode("n2", corev1.ConditionTrue, true)}, infrav1alpha1.ReasonNodeUnschedulable, true,
			"waiting for node n2, which holds the IDE's volume alice-go-home: it is cordoned"},
		{"a pod waiting for its volume's lost node", []corev1.Pod{unscheduled},
			map[string]*corev1.Node{"n2": testNode("n2", corev1.ConditionUnknown, true)}, infrav1alpha1.ReasonNodeNotReady, true,
			"waiting for node n2, which holds the IDE's volume alice-go-home: it has not been ready since"},
		{"a pod waiting for a volume on a fine node", []corev1.Pod{unscheduled},
			map[string]*corev1.Node{"n2": testNode("n2", corev1.ConditionTrue, false)}, "", false, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := nodeProblem("IDE", tc.pods, []*unstructured.Unstructured{claimOn("n2")}, tc.nodes)
			if got.reason != tc.reason || got.waiting != tc.waiting || !strings.Contains(got.message, tc.says) {
				t.Errorf("got %+v, want reason %q waiting %v saying %q", got, tc.reason, tc.waiting, tc.says)
			}
		})
	}
}

func TestNodeTroubleNeitherTimesOutNorHidesAContainerFailure(t *testing.T) {
	begun := metav1.NewTime(t0.Add(-time.Hour)) // long past the start timeout
	ws := testWorkspace(true, infrav1alpha1.WorkspaceStatus{Phase: infrav1alpha1.WorkspacePending, StartRequestedAt: &begun})
	drained := nodeIssue{problem: problem{reason: infrav1alpha1.ReasonNodeUnschedulable, message: "waiting for node n2"}, waiting: true}
	st, failure := workspaceStatus(ws, []corev1.Pod{pod("", corev1.PodPending, false, "")}, policy{node: drained}, t0)
	if st.Phase != infrav1alpha1.WorkspacePending || st.Message != "waiting for node n2" || failure.reason != infrav1alpha1.ReasonNodeUnschedulable || st.StartRequestedAt != nil {
		t.Errorf("waiting for a drained node: phase %s %q, failure %+v", st.Phase, st.Message, failure)
	}
	lost := nodeIssue{problem: problem{reason: infrav1alpha1.ReasonNodeNotReady, message: "node n1 lost"}}
	st, failure = workspaceStatus(ws, []corev1.Pod{pod("n1", corev1.PodRunning, false, "")}, policy{node: lost}, t0)
	if st.Phase != infrav1alpha1.WorkspaceFailed || failure.reason != infrav1alpha1.ReasonNodeNotReady {
		t.Errorf("on a lost node: phase %s %q, failure %+v", st.Phase, st.Message, failure)
	}
	st, failure = workspaceStatus(ws, []corev1.Pod{pod("n1", corev1.PodRunning, false, "CrashLoopBackOff")}, policy{node: lost}, t0)
	if failure.reason != infrav1alpha1.ReasonCrashLoop {
		t.Errorf("a crash loop on a lost node says %+v (%s)", failure, st.Message)
	}
}

func TestVMOnNode(t *testing.T) {
	lost := nodeIssue{problem: problem{reason: infrav1alpha1.ReasonNodeNotReady, message: "node n1 lost"}}
	starting := infrav1alpha1.VirtualMachineStatus{Backend: infrav1alpha1.BackendPod, Phase: infrav1alpha1.VMStarting}
	st, failure := vmOnNode(starting, problem{}, lost)
	if st.Phase != infrav1alpha1.VMFailed || st.Status != "Failed" || st.Message != "node n1 lost" || failure.reason != infrav1alpha1.ReasonNodeNotReady {
		t.Errorf("a launcher on a lost node: %+v %+v", st, failure)
	}
	waiting := nodeIssue{problem: problem{reason: infrav1alpha1.ReasonNodeUnschedulable, message: "waiting for node n2"}, waiting: true}
	st, _ = vmOnNode(infrav1alpha1.VirtualMachineStatus{Backend: infrav1alpha1.BackendPod, Phase: infrav1alpha1.VMScheduling}, problem{}, waiting)
	if st.Phase != infrav1alpha1.VMScheduling || st.Message != "waiting for node n2" {
		t.Errorf("a launcher waiting for its disk's node: %+v", st)
	}
	stopped := infrav1alpha1.VirtualMachineStatus{Backend: infrav1alpha1.BackendPod, Phase: infrav1alpha1.VMStopped, Message: "halted"}
	if st, f := vmOnNode(stopped, problem{}, lost); st.Message != "halted" || f.reason != "" {
		t.Errorf("a stopped VM took the node's trouble: %+v %+v", st, f)
	}
}

func TestTheStartClockRestartsAfterTheNodeWait(t *testing.T) {
	ws := testWorkspace(true, infrav1alpha1.WorkspaceStatus{Phase: infrav1alpha1.WorkspacePending, Message: "waiting for node n2"})
	st, failure := workspaceStatus(ws, []corev1.Pod{pod("n2", corev1.PodPending, false, "ContainerCreating")}, policy{}, t0)
	if st.Phase == infrav1alpha1.WorkspaceFailed || failure.reason != "" || st.StartRequestedAt == nil || !st.StartRequestedAt.Time.Equal(t0) {
		t.Errorf("the first start after a node wait: phase %s (%s), failure %+v, start requested %v", st.Phase, st.Message, failure, st.StartRequestedAt)
	}
}
