package app

import (
	"strings"
	"testing"

	"github.com/cloudspace-dev/cloudspace-operator/controllers"
	"github.com/cloudspace-dev/cloudspace-operator/internal/grpcapi"
)

// TestSetupGRPC: the API is set up only when asked for and Workspaces are served, and a
// setting it cannot run with stops the operator naming its flag, before the manager is touched.
func TestSetupGRPC(t *testing.T) {
	wc := controllers.DefaultConfig().Workspace
	if err := SetupGRPC(nil, grpcapi.DefaultConfig(), wc, true); err != nil {
		t.Errorf("the API off: %v", err)
	}
	on := grpcapi.DefaultConfig()
	on.Address = "127.0.0.1:0"
	if err := SetupGRPC(nil, on, wc, false); err != nil {
		t.Errorf("no Workspace served: %v", err)
	}
	on.Quota.MaxCallsInFlight = on.Quota.MaxWatches
	err := SetupGRPC(nil, on, wc, true)
	if err == nil || !strings.Contains(err.Error(), "--quota-max-calls-in-flight") {
		t.Errorf("calls in flight no more than watches: %v, want an error naming --quota-max-calls-in-flight", err)
	}
}
