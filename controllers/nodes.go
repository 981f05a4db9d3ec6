package controllers

import (
	"fmt"
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

// nodeProblem finds the node trouble behind pods that are not running (what names the
// workload: "IDE", "VM"): the node of a pod that is not ready is not ready itself (a lost node:
// its kubelet, runtime or link down; its pods stay there, being deleted or not, until it is
// back), or a pod waiting to be scheduled is held by the
// node its claim is bound to, which is cordoned (drained) or not ready. nodes are the engine's
// Observed.Nodes. Zero when the nodes are fine: the pod's own reasons then say why.
func nodeProblem(what string, pods []corev1.Pod, children []*unstructured.Unstructured, nodes map[string]*corev1.Node) nodeIssue {
	for _, p := range pods {
		if p.Spec.NodeName != "" {
			if readyPod([]corev1.Pod{p}) != nil {
				continue
			}
			if why := nodeNotReady(nodes, p.Spec.NodeName); why != "" {
				return nodeIssue{problem: problem{reason: infrav1alpha1.ReasonNodeNotReady,
					message: fmt.Sprintf("node %s, which runs the %s, %s; it runs again when the node is back", p.Spec.NodeName, what, why)}}
			}
			continue
		}
		if p.DeletionTimestamp != nil {
			continue
		}
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
	}
	return nodeIssue{}
}

// nodeNotReady says how the named node is not ready ("" when it is): gone, or its Ready
// condition not True, with the node's own reason and since when.
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
		// The time, not the time since: the message is written to the status only when it
		// changes.
		return fmt.Sprintf("has not been ready since %s (%s: %s)", c.LastTransitionTime.UTC().Format(time.RFC3339), c.Reason, clip(c.Message))
	}
	return "has not reported whether it is ready"
}
