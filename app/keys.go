package app

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cloudspace-dev/cloudspace-operator/controllers"
	"github.com/cloudspace-dev/cloudspace-operator/internal/access"
	"github.com/cloudspace-dev/cloudspace-operator/internal/activity"
)

// AccessKey reads the operator key from the Secret ref names (namespace/name,
// --workspace-access-key-secret), creating it when missing. It reads it before the manager
// starts, whose cache is not filled yet: no workspace renders without it.
func AccessKey(ctx context.Context, cfg *rest.Config, ref string) ([]byte, error) {
	ns, name, ok := strings.Cut(ref, "/")
	if !ok {
		return nil, fmt.Errorf("--workspace-access-key-secret %q must be namespace/name", ref)
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return nil, fmt.Errorf("creating a client: %w", err)
	}
	key, err := access.EnsureKey(ctx, c, types.NamespacedName{Namespace: ns, Name: name})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%w: create namespace %s, or name a Secret in an existing one with --workspace-access-key-secret", err, ns)
	}
	return key, err
}

// WithKey is kinds with the operator key given to the kinds that derive credentials from it,
// Workspaces and VirtualMachines, and with what their idle policies need besides: a record of
// each one's use (and of each VM's hibernation, which its launcher reports with its use), and
// the namespace the operator runs in (POD_NAMESPACE; empty outside a cluster), whose pod reads
// their activity.
func WithKey(kinds controllers.Config, key []byte, namespace string) controllers.Config {
	kinds.Workspace.AccessKey, kinds.Workspace.Activity, kinds.Workspace.OperatorNamespace = key, activity.New(), namespace
	kinds.VM.AccessKey, kinds.VM.Activity, kinds.VM.OperatorNamespace = key, activity.New(), namespace
	kinds.VM.Hibernations = controllers.NewHibernationRecord()
	return kinds
}
