package realnode

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cloudspace-dev/cloudspace-operator/pkg/workspacev1"
)

// idleTimeout is the idle timeout of the workspaces below: long enough that code-server's
// heartbeat (once a minute while in use) and the operator's readings (every 30 s) cannot make
// an IDE in use look unused. activityReadings is how often the operator reads it (its default).
const (
	idleTimeout      = 3 * time.Minute
	activityReadings = 30 * time.Second
)

// checkIdleWorkspaces: two IDEs with a three-minute idle timeout, one left alone, the other with
// an IDE session open (a connection held and a page asked for now and then, as a browser tab
// does). The one left alone is warned of on Watch (IDLE_WARNING, with when), then stopped
// (stopped_reason Idle), and Start brings it back with its files; the one in use runs on.
func checkIdleWorkspaces(t *testing.T, api apiAccess) {
	ensureNamespace(t, workspaceNS)
	c := apiClient(t, api)
	ctx, cancel := bearerContext(api, 15*time.Minute)
	defer cancel()
	events := watchWorkspaces(t, ctx, c)
	// The running quota (2) is this test's alone: the user's earlier workspaces are gone.
	waitFor(t, 2*time.Minute, "the user's earlier workspaces gone", func(context.Context) error {
		list, err := c.List(ctx, &workspacev1.ListWorkspacesRequest{Namespace: workspaceNS})
		if err != nil || len(list.GetWorkspaces()) > 0 {
			return fmt.Errorf("%d left (%v)", len(list.GetWorkspaces()), err)
		}
		return nil
	})
	for _, name := range []string{"idle-ide", "busy-ide"} {
		ref := &workspacev1.WorkspaceRef{Namespace: workspaceNS, Name: name}
		t.Cleanup(func() {
			ctx, cancel := bearerContext(api, 30*time.Second)
			defer cancel()
			_, _ = c.Delete(ctx, ref)
		})
		if _, err := c.Create(ctx, &workspacev1.CreateWorkspaceRequest{Wait: true, Workspace: &workspacev1.Workspace{Name: name, Namespace: workspaceNS,
			Storage: "1Gi", Cpu: "250m", Memory: "512Mi", IdleTimeout: idleTimeout.String()}}); err != nil {
			t.Fatalf("create-and-wait %s: %v", name, err)
		}
	}
	busySince := time.Now()
	kubectlExec(t, "idle-ide", "echo kept > /home/coder/project/idle-proof")
	stopSession := holdSession(t, "localhost:"+portForward(t, workspaceNS, "svc/busy-ide", 8080))
	defer stopSession()

	warned := awaitIdleStop(t, events, "idle-ide")
	t.Logf("idle-ide: warned it stops at %s, then stopped after %s", warned, time.Since(busySince).Round(time.Second))
	if wait := time.Until(busySince.Add(idleTimeout + 2*activityReadings)); wait > 0 {
		time.Sleep(wait) // the IDE in use must outlive its timeout and two readings of its activity
	}
	busy, err := c.Get(ctx, &workspacev1.WorkspaceRef{Namespace: workspaceNS, Name: "busy-ide"})
	if err != nil || busy.GetPhase() != "Running" || busy.GetIdleStopAt() != "" || busy.GetStoppedReason() != "" {
		t.Errorf("the IDE in use after %s: %s, idle stop %q, stopped %q (%v); want Running, unwarned", time.Since(busySince).Round(time.Second), busy.GetPhase(), busy.GetIdleStopAt(), busy.GetStoppedReason(), err)
	}
	if _, err := c.Start(ctx, &workspacev1.StartWorkspaceRequest{Ref: &workspacev1.WorkspaceRef{Namespace: workspaceNS, Name: "idle-ide"}, Wait: true}); err != nil {
		t.Fatalf("starting the idle-stopped workspace again: %v", err)
	}
	if got := strings.TrimSpace(kubectlExec(t, "idle-ide", "cat /home/coder/project/idle-proof")); got != "kept" {
		t.Errorf("after the idle stop and a start: the file holds %q, want kept", got)
	}
}

// watchWorkspaces is the API's Watch of the workspaces' namespace, as a channel of its events,
// closed when the stream ends (ctx's end ends it).
func watchWorkspaces(t *testing.T, ctx context.Context, c workspacev1.WorkspaceServiceClient) <-chan *workspacev1.WorkspaceEvent {
	t.Helper()
	watch, err := c.Watch(ctx, &workspacev1.WatchWorkspacesRequest{Namespace: workspaceNS})
	if err != nil {
		t.Fatal(err)
	}
	events := make(chan *workspacev1.WorkspaceEvent, 64)
	go func() {
		defer close(events)
		for {
			e, err := watch.Recv()
			if err != nil {
				return
			}
			select {
			case events <- e:
			case <-ctx.Done():
				return
			}
		}
	}()
	return events
}

// awaitIdleStop reads Watch events until name is warned of its idle stop and then stopped for
// being idle, and returns when the warning said it would stop.
func awaitIdleStop(t *testing.T, events <-chan *workspacev1.WorkspaceEvent, name string) string {
	t.Helper()
	deadline := time.After(idleTimeout + 3*time.Minute)
	warned := ""
	for {
		select {
		case <-deadline:
			t.Fatalf("%s: no idle stop on Watch within %s (warned: %q)", name, idleTimeout+3*time.Minute, warned)
		case e, ok := <-events:
			if !ok {
				t.Fatal("the Watch stream ended")
			}
			ws := e.GetWorkspace()
			if ws.GetName() == "busy-ide" && (ws.GetIdleStopAt() != "" || ws.GetStoppedReason() != "") {
				t.Errorf("the IDE in use: %s %s, idle stop %q, stopped %q", e.GetType(), ws.GetPhase(), ws.GetIdleStopAt(), ws.GetStoppedReason())
			}
			if ws.GetName() != name {
				continue
			}
			switch {
			case e.GetType() == workspacev1.WorkspaceEvent_IDLE_WARNING && ws.GetIdleStopAt() != "":
				warned = ws.GetIdleStopAt()
			case ws.GetStoppedReason() == "Idle" && (ws.GetPhase() == "Stopping" || ws.GetPhase() == "Stopped"):
				if warned == "" {
					t.Fatalf("%s stopped for being idle with no warning on Watch first: %s", name, ws.GetMessage())
				}
				return warned
			}
		}
	}
}

// holdSession keeps an IDE session open at addr, as a browser tab does: a connection held open,
// and a page asked for every 20 s. It returns the function that closes it.
func holdSession(t *testing.T, addr string) func() {
	t.Helper()
	done := make(chan struct{})
	client := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	go func() {
		tick := time.NewTicker(20 * time.Second)
		defer tick.Stop()
		for {
			if resp, err := client.Get(fmt.Sprintf("http://%s/login", addr)); err == nil {
				resp.Body.Close()
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() { close(done) }
}
