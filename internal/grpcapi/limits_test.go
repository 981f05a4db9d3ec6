package grpcapi

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/pkg/workspacev1"
)

// alicesIDE is started but never runs (nothing reconciles it here): a Start(wait) on it
// waits until the caller gives up.
func alicesIDE() client.Object {
	return &infrav1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Namespace: "cloudspace-workspaces", Name: "ide"},
		Spec: infrav1alpha1.WorkspaceSpec{Owner: "alice", Running: ptr.To(true)}}
}

// TestCallsInFlightAreCappedPerUser: a user who holds the cap of waiting Start calls gets
// ResourceExhausted for any further call, saying the cap; another user is served, and the
// first is served again once their calls end.
func TestCallsInFlightAreCappedPerUser(t *testing.T) {
	a := startTestAPI(t, []client.Object{alicesIDE()}, func(c *Config) {
		c.Quota.MaxCallsInFlight = 5
		c.Quota.WritesPerMinute, c.Quota.WriteBurst = 6000, 1000 // the retries below are writes too
	})
	api := workspacev1.NewWorkspaceServiceClient(a.client(t))
	ctx, cancel := context.WithCancel(context.Background())
	start := func(ctx context.Context) error {
		_, err := api.Start(as(ctx, "a-token"), &workspacev1.StartWorkspaceRequest{Ref: &workspacev1.WorkspaceRef{Name: "ide"}, Wait: true})
		return err
	}
	var wg sync.WaitGroup
	for range 5 {
		wg.Go(func() {
			// A probe below may hold a place for a moment: a holder refused then tries again.
			for status.Code(start(ctx)) == codes.ResourceExhausted {
			}
		})
	}
	eventually(t, 10*time.Second, "alice's five waits are in flight, and refuse her a read", func() bool {
		_, err := api.List(as(ctx, "a-token"), &workspacev1.ListWorkspacesRequest{})
		return status.Code(err) == codes.ResourceExhausted
	})
	short, stop := context.WithTimeout(ctx, 5*time.Second)
	defer stop()
	refusals := testutil.ToFloat64(apiRefusals.WithLabelValues(limitCallsInFlight))
	refusal := start(short)
	if status.Code(refusal) != codes.ResourceExhausted {
		t.Fatalf("alice's sixth wait: %v, want ResourceExhausted", refusal)
	}
	if got := testutil.ToFloat64(apiRefusals.WithLabelValues(limitCallsInFlight)); got < refusals+1 {
		t.Errorf("cloudspace_api_refusals_total{limit=%q} = %v after a refusal, want at least %v", limitCallsInFlight, got, refusals+1)
	}
	if msg := status.Convert(refusal).Message(); !strings.Contains(msg, "5 calls in flight") {
		t.Errorf("the refusal %q does not say the cap", msg)
	}
	if _, err := api.List(as(context.Background(), "b-token"), &workspacev1.ListWorkspacesRequest{}); err != nil {
		t.Errorf("bob's call while alice is at her cap: %v", err)
	}
	cancel()
	wg.Wait()
	eventually(t, 5*time.Second, "alice is served once her calls have ended", func() bool {
		_, err := api.Get(as(context.Background(), "a-token"), &workspacev1.WorkspaceRef{Name: "ide"})
		return err == nil
	})
}

// TestWritesAreRateLimitedPerUser: a burst of RotateAccess calls past the bucket is refused
// with when to retry; reads and another user's writes are not.
func TestWritesAreRateLimitedPerUser(t *testing.T) {
	a := startTestAPI(t, []client.Object{alicesIDE()}, func(c *Config) { c.Quota.WritesPerMinute, c.Quota.WriteBurst = 1, 3 })
	api := workspacev1.NewWorkspaceServiceClient(a.client(t))
	ctx := as(context.Background(), "a-token")
	ref := &workspacev1.WorkspaceRef{Name: "ide"}
	for i := range 3 {
		if _, err := api.RotateAccess(ctx, ref); err != nil {
			t.Fatalf("rotation %d within the burst: %v", i+1, err)
		}
	}
	_, err := api.RotateAccess(ctx, ref)
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "retry in") {
		t.Fatalf("the fourth rotation in a row: %v, want ResourceExhausted saying when to retry", err)
	}
	if d := retryDelay(st); d < 30*time.Second || d > time.Minute {
		t.Errorf("RetryInfo says retry in %s, want about a minute", d)
	}
	if _, err := api.GetAccess(ctx, ref); err != nil {
		t.Errorf("a read while writes are limited: %v", err)
	}
	if _, err := api.RotateAccess(as(context.Background(), "b-token"), &workspacev1.WorkspaceRef{Name: "bobs"}); status.Code(err) != codes.NotFound {
		t.Errorf("bob's first write: %v, want NotFound (he has no such workspace)", err)
	}
}

func retryDelay(st *status.Status) time.Duration {
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			return ri.GetRetryDelay().AsDuration()
		}
	}
	return 0
}

// TestUserStateIsBounded: the state of users who stopped calling is dropped once their
// buckets are full again, while a user with a call in flight keeps theirs.
func TestUserStateIsBounded(t *testing.T) {
	now := time.Unix(0, 0)
	l := newUserLimits(DefaultConfig().Quota, func() time.Time { return now })
	held, err := l.admit("held", workspacev1.WorkspaceService_Watch_FullMethodName)
	if err != nil {
		t.Fatal(err)
	}
	defer held()
	for _, u := range []string{"a", "b", "c", "d"} {
		release, err := l.admit(u, workspacev1.WorkspaceService_RotateAccess_FullMethodName)
		if err != nil {
			t.Fatal(err)
		}
		release()
	}
	now = now.Add(l.evictAfter)
	release, err := l.admit("e", workspacev1.WorkspaceService_Get_FullMethodName)
	if err != nil {
		t.Fatal(err)
	}
	release()
	if n := l.tracked(); n != 2 {
		t.Errorf("%d users tracked after the others were idle, want 2 (held, e)", n)
	}
}

// tracked is how many users have state.
func (l *userLimits) tracked() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.users)
}

// TestACallersDeadlineGetsTheServersAnswer: a create-and-wait whose caller's deadline comes
// first gets the server's DeadlineExceeded, saying what it waited on, not only its own
// "context deadline exceeded": the server answers while the caller still listens.
func TestACallersDeadlineGetsTheServersAnswer(t *testing.T) {
	a := startTestAPI(t, []client.Object{alicesIDE()})
	api := workspacev1.NewWorkspaceServiceClient(a.client(t))
	for _, timeout := range []time.Duration{time.Second, 3 * time.Second} {
		ctx, cancel := context.WithTimeout(as(context.Background(), "a-token"), timeout)
		_, err := api.Start(ctx, &workspacev1.StartWorkspaceRequest{Ref: &workspacev1.WorkspaceRef{Name: "ide"}, Wait: true})
		cancel()
		if msg := status.Convert(err).Message(); status.Code(err) != codes.DeadlineExceeded || !strings.Contains(msg, "was not running before the deadline; it was") {
			t.Errorf("a wait with a %s deadline: %v; want the server's DeadlineExceeded saying what it waited on", timeout, err)
		}
	}
}

// TestRefusalSeriesExistFromTheStart: every limit's and every quota's refusals have a series
// before any refusal, so that Prometheus sees the first one as an increase (a series that
// first appears at 1 shows none, and the alerts on them would miss it).
func TestRefusalSeriesExistFromTheStart(t *testing.T) {
	if n := testutil.CollectAndCount(apiRefusals); n != 3 {
		t.Errorf("%d API refusal series, want 3 (connections, calls-in-flight, writes)", n)
	}
	if n := testutil.CollectAndCount(quotaRefusals); n != 4 {
		t.Errorf("%d quota refusal series, want 4 (workspaces, running, retained, storage)", n)
	}
}
