package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cloudspace-dev/cloudspace-operator/pkg/workspacev1"
)

// e2eMaxWatches is the operator's --quota-max-watches in this suite.
const e2eMaxWatches = 2

// TestWatchStreamsArePerUserBounded: a user's Watch streams beyond the cap are refused with
// ResourceExhausted; another user is unaffected, and closing a stream frees its place.
func TestWatchStreamsArePerUserBounded(t *testing.T) {
	api := workspacev1.NewWorkspaceServiceClient(apiConn(t))
	open := func(user string) (workspacev1.WorkspaceService_WatchClient, context.CancelFunc, error) {
		ctx, cancel := context.WithTimeout(as(t, user, time.Minute), time.Minute)
		stream, err := api.Watch(ctx, &workspacev1.WatchWorkspacesRequest{})
		if err == nil {
			// The server checks the cap when the stream starts: wait for its first answer.
			_, err = firstMessageOrError(stream)
		}
		return stream, cancel, err
	}
	var cancels []context.CancelFunc
	defer func() {
		for _, c := range cancels {
			c()
		}
	}()
	for range e2eMaxWatches {
		_, cancel, err := open("bob")
		cancels = append(cancels, cancel)
		if err != nil {
			t.Fatalf("a Watch within the cap: %v", err)
		}
	}
	_, cancel, err := open("bob")
	cancels = append(cancels, cancel)
	wantCode(t, err, codes.ResourceExhausted, "Watch streams")
	_, cancel, err = open("alice")
	cancels = append(cancels, cancel)
	if err != nil {
		t.Errorf("alice's Watch while bob is at his cap: %v", err)
	}
	cancels[0]()
	waitFor(t, 30*time.Second, "a closed stream frees its place", func(context.Context) error {
		_, cancel, err := open("bob")
		cancels = append(cancels, cancel)
		return err
	})
}

// firstMessageOrError waits until the stream delivers something: an event, or the error that
// ended it. A Watch of a user with no workspaces sends nothing, so the wait is bounded.
func firstMessageOrError(stream workspacev1.WorkspaceService_WatchClient) (*workspacev1.WorkspaceEvent, error) {
	type result struct {
		ev  *workspacev1.WorkspaceEvent
		err error
	}
	done := make(chan result, 1)
	go func() {
		ev, err := stream.Recv()
		done <- result{ev, err}
	}()
	select {
	case r := <-done:
		return r.ev, r.err
	case <-time.After(2 * time.Second):
		return nil, nil // open and quiet: the server accepted it
	}
}

// TestOversizedRequestIsRefused: a request over the server's message limit is refused before
// it is decoded.
func TestOversizedRequestIsRefused(t *testing.T) {
	api := workspacev1.NewWorkspaceServiceClient(apiConn(t))
	huge := &workspacev1.CreateWorkspaceRequest{Workspace: &workspacev1.Workspace{Name: "huge", Image: strings.Repeat("x", 256<<10)}}
	_, err := api.Create(as(t, "alice", 30*time.Second), huge)
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(status.Convert(err).Message(), "larger than max") {
		t.Errorf("a 256 KiB request got %v, want ResourceExhausted for its size", err)
	}
}
