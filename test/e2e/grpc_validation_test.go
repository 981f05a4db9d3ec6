package e2e

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/cloudspace-dev/cloudspace-operator/pkg/workspacev1"
	"github.com/cloudspace-dev/cloudspace-operator/test/framework"
)

// TestAPIAgreesWithTheSchema runs the table the CRD is also tested with (test/integration)
// through the gRPC API: each invalid value is InvalidArgument naming the API's field, each
// valid one is created.
func TestAPIAgreesWithTheSchema(t *testing.T) {
	api := workspacev1.NewWorkspaceServiceClient(apiConn(t))
	for i, tc := range framework.WorkspaceCases {
		ws := &workspacev1.Workspace{Name: fmt.Sprintf("case-%d", i)}
		if err := setCaseField(ws, tc); err != nil {
			t.Fatal(err)
		}
		_, err := api.Create(as(t, "bob", 30*time.Second), &workspacev1.CreateWorkspaceRequest{Workspace: ws})
		if !tc.Valid {
			wantCode(t, err, codes.InvalidArgument, "workspace."+tc.Field+":")
			continue
		}
		if err != nil {
			t.Errorf("%s = %q: %v, want it created", tc.Field, tc.Value, err)
			continue
		}
		if _, err := api.Delete(as(t, "bob", 30*time.Second), &workspacev1.WorkspaceRef{Name: ws.Name}); err != nil {
			t.Fatal(err)
		}
	}
}

func setCaseField(ws *workspacev1.Workspace, tc framework.WorkspaceCase) error {
	switch tc.Field {
	case "cpu":
		ws.Cpu = tc.Value
	case "memory":
		ws.Memory = tc.Value
	case "storage":
		ws.Storage = tc.Value
	case "image":
		ws.Image = tc.Value
	case "git_url":
		ws.GitUrl = tc.Value
	case "port":
		p, err := strconv.ParseUint(tc.Value, 10, 32)
		if err != nil {
			return err
		}
		ws.Port = uint32(p)
	default:
		return fmt.Errorf("no API field for case field %q", tc.Field)
	}
	return nil
}

// TestAPIEnforcesTheOperatorsLimits: within the CRD's ceilings but over the operator's limits
// (its defaults here) is InvalidArgument naming the API's field.
func TestAPIEnforcesTheOperatorsLimits(t *testing.T) {
	api := workspacev1.NewWorkspaceServiceClient(apiConn(t))
	for _, ws := range []*workspacev1.Workspace{{Name: "greedy-cpu", Cpu: "16"}, {Name: "greedy-disk", Storage: "1Ti"}} {
		_, err := api.Create(as(t, "bob", 30*time.Second), &workspacev1.CreateWorkspaceRequest{Workspace: ws})
		field := "workspace.cpu:"
		if ws.Storage != "" {
			field = "workspace.storage:"
		}
		wantCode(t, err, codes.InvalidArgument, field)
	}
}
