package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/cloudspace-dev/cloudspace-operator/test/framework"
)

// TestAnOperatorServingOnlyChartKindsNeedsNoWorkspaceKey: an operator whose watches file
// serves no Workspace starts without the Workspaces' access key, so without the namespace that
// key lives in, and without the workspace API its flags ask for.
func TestAnOperatorServingOnlyChartKindsNeedsNoWorkspaceKey(t *testing.T) {
	dir := t.TempDir()
	// Demo, selecting no resource: the suite's operator serves the Demos.
	watches := "- group: test.cloudspace.dev\n  version: v1\n  kind: Demo\n  chart: " + filepath.Join(testdata, "charts", "demo") +
		"\n  selector:\n    matchLabels:\n      test.cloudspace.dev/nobody: \"true\"\n"
	path := filepath.Join(dir, "watches.yaml")
	if err := os.WriteFile(path, []byte(watches), 0o600); err != nil {
		t.Fatal(err)
	}
	grpcPort, err := framework.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	op, err := framework.StartOperator(operatorBinary, cluster.Kubeconfig, filepath.Join(dir, "operator.log"),
		"--watches-file="+path, "--workspace-access-key-secret=no-such-namespace/key",
		"--grpc-bind-address=127.0.0.1:"+strconv.Itoa(grpcPort))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = op.Stop(time.Minute) }()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := op.WaitReady(ctx); err != nil {
		log, _ := os.ReadFile(op.LogPath)
		t.Fatalf("%v\n%s", err, log)
	}
}
