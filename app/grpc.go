package app

import (
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/cloudspace-dev/cloudspace-operator/controllers"
	"github.com/cloudspace-dev/cloudspace-operator/internal/grpcapi"
)

// SetupGRPC adds the workspace API to the manager when cfg gives it an address and Workspaces
// are served: without them it would have nothing to serve (the shipped Deployment sets an
// address). It shares the Workspace kind's limits, key and activity record, wc's.
func SetupGRPC(mgr ctrl.Manager, cfg grpcapi.Config, wc controllers.WorkspaceConfig, served bool) error {
	if !cfg.Enabled() {
		return nil
	}
	if !served {
		ctrl.Log.WithName("setup").Info("the workspace API is off: the watches file serves no Workspace", "grpcBindAddress", cfg.Address)
		return nil
	}
	// The certificate's Secret is optional in the Deployment, so that an install never waits
	// for it: the server serves a self-signed one until the files appear.
	srv, err := grpcapi.New(mgr, cfg, grpcapi.WorkspaceKind{Limits: wc.Limits, AccessKey: wc.AccessKey, Activity: wc.Activity,
		GatewayTrusted: wc.IDEAuth == controllers.IDEAuthGateway})
	if err != nil {
		return fmt.Errorf("setting up the gRPC API: %w", err)
	}
	if err := mgr.Add(srv); err != nil {
		return fmt.Errorf("adding the gRPC API to the manager: %w", err)
	}
	return nil
}
