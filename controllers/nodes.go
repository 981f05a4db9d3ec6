package controllers

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/engine"
)

// nodeIssue is why a workload's pod cannot run where it must, found on its node.
type nodeIssue struct {
	problem
	// waiting: the pod waits to be scheduled on the node its volume is bound to (a drain, or a
	// lost node); otherwise the pod is on a node that stopped reporting or is not ready.
	waiting bool
}

// volumeConflicts are what the scheduler says of the nodes a pod cannot use because its volume
// is bound to another node: Kubernetes 1.24 and later, and earlier.
var volumeConflicts = []string{"didn't match PersistentVolume's node affinity", "volume node affinity conflict"}

// waitsForVolumeNode tells whether the scheduler cannot place the pod for its volume's node.
func waitsForVolumeNode(p corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			for _, phrase := range volumeConflicts {
				if strings.Contains(c.Message, phrase) {
					return true
				}
			}
		}
	}
	return false
}

// nodeProblem finds the node trouble behind pods that are not running (what names the
// workload: "IDE", "VM"): the node of a live pod that is not ready is not ready itself (a lost
// node: its kubelet, runtime or link down), or a live pod the scheduler cannot place for its
// volume waits for the node its claim is bound to, which is cordoned (drained) or not ready.
// Only when no pod is live does a pod being deleted count (one evicted from a lost node stays
// so until the node is back). nodes are the engine's Observed.Nodes; nil says nothing is known
// of them. Zero when the nodes are fine: the pod's own reasons then say why.
func nodeProblem(what string, pods []corev1.Pod, children []*unstructured.Unstructured, nodes map[string]*corev1.Node) nodeIssue {
	if nodes == nil {
		return nodeIssue{}
	}
	candidates := livePods(pods)
	if len(candidates) == 0 {
		for _, p := range pods {
			if p.DeletionTimestamp != nil && p.Spec.NodeName != "" {
				candidates = append(candidates, p)
			}
		}
	}
	for _, p := range candidates {
		switch {
		case p.Spec.NodeName != "" && readyPod([]corev1.Pod{p}) == nil:
			if why := nodeNotReady(nodes, p.Spec.NodeName); why != "" {
				return nodeIssue{problem: problem{reason: infrav1alpha1.ReasonNodeNotReady,
					message: fmt.Sprintf("node %s, which runs the %s, %s; it runs again when the node is back", p.Spec.NodeName, what, why)}}
			}
		case p.Spec.NodeName == "" && waitsForVolumeNode(p):
			if issue := volumeNodeProblem(what, children, nodes); issue.reason != "" {
				return issue
			}
		}
	}
	return nodeIssue{}
}

// volumeNodeProblem is the trouble of the node a claim among the children is bound to.
func volumeNodeProblem(what string, children []*unstructured.Unstructured, nodes map[string]*corev1.Node) nodeIssue {
	for _, c := range children {
		node := c.GetAnnotations()[engine.SelectedNodeAnnotation]
		if c.GetKind() != "PersistentVolumeClaim" || node == "" {
			continue
		}
		waitFor := fmt.Sprintf("waiting for node %s, which holds the %s's volume %s: ", node, what, c.GetName())
		if why := nodeNotReady(nodes, node); why != "" {
			return nodeIssue{problem: problem{reason: infrav1alpha1.ReasonNodeNotReady, message: waitFor + "it " + why}, waiting: true}
		}
		if n := nodes[node]; n != nil && n.Spec.Unschedulable {
			return nodeIssue{problem: problem{reason: infrav1alpha1.ReasonNodeUnschedulable,
				message: waitFor + "it is cordoned (drained for maintenance); the " + what + " starts there once it is uncordoned"}, waiting: true}
		}
	}
	return nodeIssue{}
}

// nodeNotReady says how the named node is not ready ("" when it is): gone, or its Ready
// condition not True, with the node's reason and since when. The node's message is left out:
// some say how long ago something happened, and the status is written only when it changes.
func nodeNotReady(nodes map[string]*corev1.Node, name string) string {
	n := nodes[name]
	if n == nil {
		return "no longer exists"
	}
	for _, c := range n.Status.Conditions {
		if c.Type != corev1.NodeReady {
			continue
		}
		if c.Status == corev1.ConditionTrue {
			return ""
		}
		return fmt.Sprintf("has not been ready since %s (%s)", c.LastTransitionTime.UTC().Format(time.RFC3339), c.Reason)
	}
	return "has not reported whether it is ready"
}
