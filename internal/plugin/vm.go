package plugin

import (
	"context"
	"fmt"
	"io"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"

	"github.com/spf13/cobra"
)

// vmResource is the operator's VirtualMachine.
var vmResource = schema.GroupVersionResource{Group: "infra.cloudspace.dev", Version: "v1alpha1", Resource: "virtualmachines"}

func newVMCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "vm",
		Short: "Start a VirtualMachine the operator stopped",
		Long: `VirtualMachines, with your own Kubernetes rights (they have no API of their own):
"vm start NAME" boots one the operator stopped (for being idle, or after its failed starts) by
raising its spec.startRequests.`,
	}
	cmd.AddCommand(&cobra.Command{Use: "start NAME", Short: "Start a VirtualMachine the operator stopped (its disks are kept)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			vms, err := g.inNamespace(vmResource)
			if err != nil {
				return err
			}
			return startVM(cmd.Context(), vms, args[0], g.stdout)
		}})
	return cmd
}

// startVM starts a VM the operator stopped (requestStart); it says so, or why nothing will run.
func startVM(ctx context.Context, vms dynamic.ResourceInterface, name string, out io.Writer) error {
	vm, err := requestStart(ctx, vms, "virtualmachine", name, out)
	if err == nil {
		if strategy, _, _ := unstructured.NestedString(vm.Object, "spec", "runStrategy"); strategy == "Halted" {
			fmt.Fprintf(out, "note: its runStrategy is Halted, which keeps it stopped: set it to Always to run it\n")
		}
	}
	return err
}

// requestStart raises the spec.startRequests of the object of that kind, conditional on the
// version read (a conflict reads it again), which starts one the operator stopped, and says so.
func requestStart(ctx context.Context, objs dynamic.ResourceInterface, kind, name string, out io.Writer) (*unstructured.Unstructured, error) {
	var obj *unstructured.Unstructured
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		current, err := objs.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		n, _, _ := unstructured.NestedInt64(current.Object, "spec", "startRequests")
		patch := fmt.Sprintf(`{"metadata":{"resourceVersion":%q},"spec":{"startRequests":%d}}`, current.GetResourceVersion(), n+1)
		obj, err = objs.Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		return err
	})
	switch {
	case apierrors.IsNotFound(err):
		return nil, withCode(ExitNotFound, "%s %q not found", kind, name)
	case apierrors.IsForbidden(err):
		return nil, withCode(ExitDenied, "%w", err)
	case err != nil:
		return nil, withCode(ExitFailed, "starting %s %q: %w", kind, name, err)
	}
	n, _, _ := unstructured.NestedInt64(obj.Object, "spec", "startRequests")
	fmt.Fprintf(out, "%s/%s: start requested (spec.startRequests %d)\n", kind, name, n)
	return obj, nil
}
