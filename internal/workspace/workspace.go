// Package workspace holds the Workspace's rules in one place, for the operator's lifecycle
// (controllers) and the workspace API (internal/grpcapi) alike: decoding one, its defaults, the
// operator's limits, and the labels its children carry. Whether it should run is the spec's
// own accessor (WorkspaceSpec.WantsRunning).
package workspace

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/decode"
	"github.com/cloudspace-dev/cloudspace-operator/internal/engine"
)

// The defaults of a Workspace's fields. The CRD's markers (api/v1alpha1) fill them in on
// create and the chart's values.yaml holds them too; a workspace stored before a default was
// added renders with these. TestDefaultsAgreeWithTheCRDAndTheChart keeps the three the same.
const (
	DefaultImage        = "codercom/code-server:4.96.4"
	DefaultPort         = 8080
	DefaultStartTimeout = 5 * time.Minute
	DefaultCPU          = "1"
	DefaultMemory       = "2Gi"
	DefaultStorage      = "10Gi"
)

// ChartName is helm-charts/workspace's name: the app.kubernetes.io/name label of every child.
const ChartName = "workspace"

// OwnerLabel carries a workspace's owner, on the Workspace (set by the API) and on every child
// (set by the chart), so that a user's workspaces and volumes are found by label, and a
// retained volume is adopted only by a workspace of the same owner.
const OwnerLabel = "infra.cloudspace.dev/owner"

// Volumes selects the workspace volumes of owner in a namespace: live and retained.
func Volumes(owner string) client.MatchingLabels {
	return client.MatchingLabels{engine.LabelName: ChartName, OwnerLabel: owner}
}

// Children selects the children of the workspace named name, and what it left behind.
func Children(name string) client.MatchingLabels {
	return client.MatchingLabels{engine.LabelName: ChartName, engine.LabelInstance: name}
}

// Decode decodes a Workspace read unstructured; the error names the field that does not fit
// the Go type ("spec.startTimeout: ...").
func Decode(obj *unstructured.Unstructured) (*infrav1alpha1.Workspace, error) {
	ws := &infrav1alpha1.Workspace{}
	if err := decode.FromUnstructured(obj.Object, ws); err != nil {
		return nil, fmt.Errorf("decoding workspace: %w", err)
	}
	return ws, nil
}
