package plugin

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/cloudspace-dev/cloudspace-operator/internal/inspect"
)

// Missing is the status of a child the resource's inventory names and the cluster lacks: deleted
// by hand, say, and not yet put back.
const Missing = "Missing"

// Node is a resource or one of its children, and whether it is ready.
type Node struct {
	Kind       string `json:"kind"`
	APIVersion string `json:"apiVersion"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
	Ready      bool   `json:"ready"`
	// Status is the resource's Ready condition status, or a child's kstatus status (Current,
	// InProgress, Failed, Terminating) or Missing.
	Status string `json:"status"`
	// Reason is the resource's Ready condition reason.
	Reason   string `json:"reason,omitempty"`
	Message  string `json:"message,omitempty"`
	Children []Node `json:"children,omitempty"`
}

func newTreeCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "tree KIND NAME",
		Short: "Show a resource, the children the operator made for it, and why one is not ready",
		Long: `Show a resource of any kind the operator serves, each child in its status.inventory with its
readiness (kstatus), and the reason when one is not ready. A child the inventory names but the
cluster lacks is shown as Missing. KIND is a kind, resource or short name (gd, ws, cvm).
Exits 3 when the resource or a child is not ready.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runTree(cmd.Context(), g, args[0], args[1])
		},
	}
}

func runTree(ctx context.Context, g *globals, kind, name string) error {
	mapping, err := resolveKind(g, kind)
	if err != nil {
		return err
	}
	dyn, err := g.dynamicClient()
	if err != nil {
		return err
	}
	ns, _, err := g.kube.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return withCode(ExitFailed, "reading the namespace: %w", err)
	}
	obj, err := dyn.Resource(mapping.Resource).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return withCode(ExitNotFound, "%s %q not found in namespace %s", mapping.GroupVersionKind.Kind, name, ns)
	case err != nil:
		return withCode(ExitFailed, "reading %s %s: %w", mapping.GroupVersionKind.Kind, name, err)
	}
	root, err := tree(ctx, dyn, g, obj)
	if err != nil {
		return err
	}
	if err := g.print(root, func(w *tabwriter.Writer) { printTree(w, root) }); err != nil {
		return err
	}
	if !allReady(root) {
		return withCode(ExitNotReady, "%s %s is not ready", root.Kind, root.Name)
	}
	return nil
}

// resolveKind maps a kind, resource or short name to its resource, as kubectl does.
func resolveKind(g *globals, kind string) (*meta.RESTMapping, error) {
	mapper, err := g.kube.ToRESTMapper()
	if err != nil {
		return nil, withCode(ExitFailed, "reading the cluster's API resources: %w", err)
	}
	gvk, err := mapper.KindFor(schema.GroupVersionResource{Resource: kind})
	if err != nil {
		return nil, withCode(ExitUsage, "the cluster serves no kind %q: %v", kind, err)
	}
	mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, withCode(ExitUsage, "the cluster serves no kind %q: %v", kind, err)
	}
	return mapping, nil
}

// tree is obj and its children from status.inventory, each with its readiness.
func tree(ctx context.Context, dyn dynamic.Interface, g *globals, obj *unstructured.Unstructured) (Node, error) {
	ready := inspect.Ready(obj)
	root := nodeOf(obj)
	root.Status, root.Reason, root.Message = string(ready.Status), ready.Reason, ready.Message
	root.Ready = ready.Status == metav1.ConditionTrue && inspect.IsReady(obj)
	children, err := inspect.Inventory(obj)
	if err != nil {
		return root, withCode(ExitFailed, "%s %s: %w", obj.GetKind(), obj.GetName(), err)
	}
	mapper, err := g.kube.ToRESTMapper()
	if err != nil {
		return root, withCode(ExitFailed, "reading the cluster's API resources: %w", err)
	}
	for _, c := range children {
		n, err := childNode(ctx, dyn, mapper, c)
		if err != nil {
			return root, err
		}
		root.Children = append(root.Children, n)
	}
	return root, nil
}

// childNode reads a child and computes its readiness; a child the cluster lacks is Missing.
func childNode(ctx context.Context, dyn dynamic.Interface, mapper meta.RESTMapper, c inspect.Child) (Node, error) {
	missing := Node{Kind: c.GVK.Kind, APIVersion: c.GVK.GroupVersion().String(), Namespace: c.Namespace, Name: c.Name,
		Status: Missing, Message: "in the inventory but not in the cluster: the operator puts it back"}
	mapping, err := mapper.RESTMapping(c.GVK.GroupKind(), c.GVK.Version)
	if err != nil {
		missing.Message = fmt.Sprintf("the cluster no longer serves %s: %v", c.GVK, err)
		return missing, nil
	}
	obj, err := dyn.Resource(mapping.Resource).Namespace(c.Namespace).Get(ctx, c.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return missing, nil
	case err != nil:
		return Node{}, withCode(ExitFailed, "reading %s %s: %w", c.GVK.Kind, c.Name, err)
	}
	n := nodeOf(obj)
	res, err := status.Compute(obj)
	if err != nil {
		n.Status, n.Message = status.UnknownStatus.String(), err.Error()
		return n, nil
	}
	n.Status, n.Message, n.Ready = res.Status.String(), res.Message, res.Status == status.CurrentStatus
	return n, nil
}

func nodeOf(obj *unstructured.Unstructured) Node {
	return Node{Kind: obj.GetKind(), APIVersion: obj.GetAPIVersion(), Namespace: obj.GetNamespace(), Name: obj.GetName()}
}

func allReady(n Node) bool {
	if !n.Ready {
		return false
	}
	for _, c := range n.Children {
		if !allReady(c) {
			return false
		}
	}
	return true
}

func printTree(w *tabwriter.Writer, root Node) {
	row(w, "NAMESPACE", "NAME", "READY", "STATUS", "REASON", "MESSAGE")
	row(w, root.Namespace, root.Kind+"/"+root.Name, yesNo(root.Ready), root.Status, root.Reason, root.Message)
	for i, c := range root.Children {
		branch := "├─ "
		if i == len(root.Children)-1 {
			branch = "└─ "
		}
		row(w, c.Namespace, branch+c.Kind+"/"+c.Name, yesNo(c.Ready), c.Status, "", c.Message)
	}
}

func yesNo(b bool) string {
	if b {
		return "True"
	}
	return "False"
}
