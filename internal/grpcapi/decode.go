package grpcapi

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/workspace"
)

// decodingReader reads Workspaces as unstructured objects and decodes each one on its own;
// every other read passes through. A typed read decodes a whole list at once, so one Workspace
// its Go type cannot hold (stored before the CRD refused such values, e.g. startTimeout: soon)
// failed every list of Workspaces, and with them every tenant's calls. Here such a Workspace
// fails only reads of itself, and lists leave it out; its own status says why it does not
// start (ValuesInvalid). Over the manager's cache, these reads share the engine's informer of
// Workspaces instead of holding a second, typed copy of each.
type decodingReader struct {
	client.Reader
}

// undecodableError is a Workspace that its Go type cannot hold. owner is its spec.owner, so
// that only its owner is told what is wrong with it.
type undecodableError struct {
	name, owner string
	err         error
}

func (e *undecodableError) Error() string {
	return fmt.Sprintf("workspace %s holds a value the operator cannot read (%v); it can only be deleted with kubectl", e.name, e.err)
}

var workspaceGVK = infrav1alpha1.GroupVersion.WithKind("Workspace")

func (r decodingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	ws, ok := obj.(*infrav1alpha1.Workspace)
	if !ok {
		return r.Reader.Get(ctx, key, obj, opts...)
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(workspaceGVK)
	if err := r.Reader.Get(ctx, key, u, opts...); err != nil {
		return err
	}
	return decodeInto(u, ws)
}

func (r decodingReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	wl, ok := list.(*infrav1alpha1.WorkspaceList)
	if !ok {
		return r.Reader.List(ctx, list, opts...)
	}
	ul := &unstructured.UnstructuredList{}
	ul.SetGroupVersionKind(infrav1alpha1.GroupVersion.WithKind("WorkspaceList"))
	if err := r.Reader.List(ctx, ul, opts...); err != nil {
		return err
	}
	wl.ResourceVersion, wl.Continue = ul.GetResourceVersion(), ul.GetContinue()
	wl.Items = make([]infrav1alpha1.Workspace, 0, len(ul.Items))
	for i := range ul.Items {
		var ws infrav1alpha1.Workspace
		if decodeInto(&ul.Items[i], &ws) == nil {
			wl.Items = append(wl.Items, ws)
		}
	}
	return nil
}

// decodingClient writes with its Client and reads through reads, a decodingReader.
type decodingClient struct {
	client.Client
	reads decodingReader
}

func (c decodingClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return c.reads.Get(ctx, key, obj, opts...)
}

func (c decodingClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return c.reads.List(ctx, list, opts...)
}

// decodeInto decodes u into ws; u, which may be the cache's, is only read.
func decodeInto(u *unstructured.Unstructured, ws *infrav1alpha1.Workspace) error {
	decoded, err := workspace.Decode(u)
	if err != nil {
		owner, _, _ := unstructured.NestedString(u.Object, "spec", "owner")
		return &undecodableError{name: u.GetName(), owner: owner, err: err}
	}
	*ws = *decoded
	return nil
}
