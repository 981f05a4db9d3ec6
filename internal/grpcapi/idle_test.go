package grpcapi

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/activity"
	"github.com/cloudspace-dev/cloudspace-operator/pkg/workspacev1"
)

// recordingStream is a Watch stream that keeps what it is sent.
type recordingStream struct {
	grpc.ServerStream
	sent []*workspacev1.WorkspaceEvent
}

func (r *recordingStream) Send(e *workspacev1.WorkspaceEvent) error {
	r.sent = append(r.sent, e)
	return nil
}

// TestWatchCarriesTheIdleWarning: a workspace's idle warning (and its lifting) is an event on
// Watch with when it stops; the stop is a phase change with the reason.
func TestWatchCarriesTheIdleWarning(t *testing.T) {
	ws := &infrav1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Namespace: "ides", Name: "sleepy", UID: "sleepy-uid"},
		Spec: infrav1alpha1.WorkspaceSpec{Owner: "ida", Running: ptr.To(true)}, Status: infrav1alpha1.WorkspaceStatus{Phase: infrav1alpha1.WorkspaceRunning}}
	server := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(ws).WithStatusSubresource(ws).
		WithIndex(&infrav1alpha1.Workspace{}, ownerField, ownerIndex).Build()
	cfg := testSettings(t, inIDEs)
	s := &v1Service{w: newWorkspaces(server, server, server, newNotifier(), cfg, nil)}
	stream, sent := &recordingStream{}, map[types.NamespacedName]watched{}
	next := func(change func(*infrav1alpha1.WorkspaceStatus)) []*workspacev1.WorkspaceEvent {
		t.Helper()
		if change != nil {
			change(&ws.Status)
			if err := server.Status().Update(context.Background(), ws); err != nil {
				t.Fatal(err)
			}
		}
		stream.sent = nil
		if err := s.sendChanges(context.Background(), stream, "ida", "ides", "", sent); err != nil {
			t.Fatal(err)
		}
		return stream.sent
	}
	if got := next(nil); len(got) != 1 || got[0].GetType() != workspacev1.WorkspaceEvent_ADDED {
		t.Fatalf("first: %v, want ADDED", got)
	}
	stopAt := metav1.NewTime(time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC))
	got := next(func(st *infrav1alpha1.WorkspaceStatus) { st.IdleStopAt, st.Message = &stopAt, "unused since …" })
	if len(got) != 1 || got[0].GetType() != workspacev1.WorkspaceEvent_IDLE_WARNING || got[0].GetWorkspace().GetIdleStopAt() != "2026-11-25T12:00:00Z" {
		t.Fatalf("warned: %v, want IDLE_WARNING with idle_stop_at", got)
	}
	if got := next(nil); len(got) != 0 {
		t.Errorf("nothing changed: %v, want no event", got)
	}
	got = next(func(st *infrav1alpha1.WorkspaceStatus) {
		st.IdleStopAt, st.Phase, st.StoppedReason = nil, infrav1alpha1.WorkspaceStopping, infrav1alpha1.StoppedIdle
	})
	if len(got) != 1 || got[0].GetType() != workspacev1.WorkspaceEvent_PHASE_CHANGED || got[0].GetWorkspace().GetStoppedReason() != "Idle" {
		t.Errorf("stopped: %v, want PHASE_CHANGED with stopped_reason Idle", got)
	}
}

// TestACallOnAWorkspaceIsAUse: KeepAlive (as any call on it) records the owner's use of the
// workspace, which postpones its idle stop; another user's call on it records nothing.
func TestACallOnAWorkspaceIsAUse(t *testing.T) {
	ws := &infrav1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Namespace: "ides", Name: "kept", UID: "kept-uid"},
		Spec: infrav1alpha1.WorkspaceSpec{Owner: "ida", Running: ptr.To(true)}}
	server := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(ws).
		WithIndex(&infrav1alpha1.Workspace{}, ownerField, ownerIndex).Build()
	cfg := testSettings(t, inIDEs)
	cfg.Activity = activity.New()
	s := &v1Service{w: newWorkspaces(server, server, server, newNotifier(), cfg, nil)}
	ref := &workspacev1.WorkspaceRef{Namespace: "ides", Name: "kept"}
	if _, err := s.KeepAlive(context.WithValue(context.Background(), userKey{}, "mallory"), ref); err == nil {
		t.Error("another user's KeepAlive answered")
	}
	if use := cfg.Activity.Of(ws.UID); !use.Last.IsZero() {
		t.Errorf("another user's call counted as a use at %s", use.Last)
	}
	before := time.Now()
	if _, err := s.KeepAlive(context.WithValue(context.Background(), userKey{}, "ida"), ref); err != nil {
		t.Fatal(err)
	}
	use := cfg.Activity.Of(ws.UID)
	if use.Last.Before(before) {
		t.Errorf("the owner's KeepAlive: last use %s, want now", use.Last)
	}
	// List says when each was last used, and is no use itself.
	list, err := s.List(context.WithValue(context.Background(), userKey{}, "ida"), &workspacev1.ListWorkspacesRequest{})
	if err != nil || len(list.GetWorkspaces()) != 1 || list.GetWorkspaces()[0].GetLastUsed() != use.Last.UTC().Format(time.RFC3339) {
		t.Errorf("ida's list: %v, %v; want her workspace last used at %s", list, err, use.Last.UTC().Format(time.RFC3339))
	}
	if after := cfg.Activity.Of(ws.UID); !after.Last.Equal(use.Last) {
		t.Errorf("the List counted as a use at %s", after.Last)
	}
}
