package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"math"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/cloudspace-dev/cloudspace-operator/internal/grpcapi"
	"github.com/cloudspace-dev/cloudspace-operator/pkg/workspacev1"
	"github.com/cloudspace-dev/cloudspace-operator/test/framework"
)

// api is the API as a client on its own connection sees it: each user's client has one, as a
// person's would (a connection carries a bounded number of calls at once).
// callsPerConnection is the most calls the server lets one connection carry at once
// (--grpc-max-streams-per-connection's default).
var callsPerConnection = grpcapi.DefaultConfig().Conn.MaxStreamsPerConnection

func (a *abuse) api(conn string) workspacev1.WorkspaceServiceClient {
	a.mu.Lock()
	defer a.mu.Unlock()
	c, ok := a.conns[conn]
	if !ok {
		var err error
		c, err = grpc.NewClient(a.addr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: a.roots, MinVersion: tls.VersionTLS12})))
		if err != nil {
			panic(err) // only a malformed target fails here, and the target is ours
		}
		a.conns[conn] = c
	}
	return workspacev1.NewWorkspaceServiceClient(c)
}

// closeConns closes every client connection.
func (a *abuse) closeConns() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, c := range a.conns {
		c.Close()
	}
}

// createsOverQuota has every user fire creates at once, more than the running quota allows.
func (a *abuse) createsOverQuota(ctx context.Context) (string, string, error) {
	t := &tally{}
	var wg sync.WaitGroup
	for user, token := range a.tokens {
		for i := range a.o.creates {
			wg.Go(func() {
				callCtx, cancel := context.WithTimeout(a.as(ctx, token), 30*time.Second)
				defer cancel()
				_, err := a.api(user).Create(callCtx, &workspacev1.CreateWorkspaceRequest{Workspace: &workspacev1.Workspace{Name: fmt.Sprintf("%s-%d", user, i)}})
				t.add(err)
			})
		}
	}
	wg.Wait()
	// The attacks after this one count the API server's requests: the operator's work on these
	// workspaces must be done first.
	if err := a.allRunning(ctx); err != nil {
		return "", "", err
	}
	return t.String(), t.over(codes.OK, len(a.tokens)*maxRunning, "created"), nil
}

// allRunning waits until every user's workspaces are Running.
func (a *abuse) allRunning(ctx context.Context) error {
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		for user, token := range a.tokens {
			list, err := a.api(user).List(a.as(ctx, token), &workspacev1.ListWorkspacesRequest{})
			if err != nil {
				return false, fmt.Errorf("listing workspaces: %w", err)
			}
			for _, ws := range list.Workspaces {
				if ws.Phase != "Running" {
					return false, nil
				}
			}
		}
		return true, nil
	})
}

// watchStreams has every user open more Watch streams than the cap, then closes them all.
func (a *abuse) watchStreams(ctx context.Context) (string, string, error) {
	t := &tally{}
	streamCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for user, token := range a.tokens {
		wg.Go(func() {
			for range a.o.watches {
				stream, err := a.api(user).Watch(a.as(streamCtx, token), &workspacev1.WatchWorkspacesRequest{})
				if err == nil {
					err = firstAnswer(stream)
				}
				t.add(err)
			}
		})
	}
	wg.Wait()
	return t.String(), t.over(codes.OK, len(a.tokens)*maxWatches, "opened"), nil
}

// firstAnswer waits for a stream's first message or error; a stream quiet for two seconds was
// accepted (a user with no workspaces gets no event), so no stream can hold the run.
func firstAnswer(stream workspacev1.WorkspaceService_WatchClient) error {
	done := make(chan error, 1)
	go func() {
		_, err := stream.Recv()
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(2 * time.Second):
		return nil
	}
}

// flood makes call from many workers, bounded in count (-flood) and time (-flood-for), and
// returns the answers, how long it took, and the API server's request counts before and after.
func (a *abuse) flood(ctx context.Context, call func(ctx context.Context, i int) error) (t *tally, took time.Duration, before, after map[string]float64, err error) {
	if before, err = a.apiRequests(ctx); err != nil {
		return nil, 0, nil, nil, err
	}
	floodCtx, cancel := context.WithTimeout(ctx, a.o.floodFor)
	defer cancel()
	t = &tally{}
	start := time.Now()
	parallelUntil(floodCtx, a.o.workers, a.o.flood, func(i int) { t.add(call(floodCtx, i)) })
	took = time.Since(start)
	after, err = a.apiRequests(ctx)
	return t, took, before, after, err
}

// tokenFlood calls with wrong tokens from many workers, bounded in count and time, and counts
// the API server's requests meanwhile: a flood must not turn into reads of the token Secret
// (at most one per tokenSecretTTL), nor TokenReviews past their rate; each call is refused
// (Unauthenticated, or Unavailable once the reviews' rate is spent).
func (a *abuse) tokenFlood(ctx context.Context) (string, string, error) {
	t, took, before, after, err := a.flood(ctx, func(ctx context.Context, i int) error {
		_, err := a.api(fmt.Sprint("flood-", i%a.o.workers)).List(a.as(ctx, fmt.Sprintf("wrong-%d", i)), &workspacev1.ListWorkspacesRequest{})
		return err
	})
	if err != nil {
		return "", "", err
	}
	reads, reviews := after["secrets"]-before["secrets"], after["tokenreviews"]-before["tokenreviews"]
	answer := fmt.Sprintf("%s in %.1f s; API server requests %.0f: token Secret reads %.0f, TokenReviews %.0f", t, took.Seconds(),
		framework.Sum(after)-framework.Sum(before), reads, reviews)
	// The API's default rate of reviews, in bursts of twice that.
	rate := float64(grpcapi.DefaultConfig().Tokens.ReviewsPerSecond)
	// DeadlineExceeded: calls the flood's own deadline cut while they waited for a place.
	through := t.other("answered", codes.Unauthenticated, codes.Unavailable, codes.DeadlineExceeded)
	switch {
	case reads > 1+math.Floor(took.Seconds()/tokenSecretTTL.Seconds()):
		through = fmt.Sprintf("%.0f reads of the token Secret in %.1f s", reads, took.Seconds())
	case reviews > 2*rate+rate*(took.Seconds()+1): // a second's slack for the two clocks
		through = fmt.Sprintf("%.0f TokenReviews in %.1f s, over %.0f a second", reviews, took.Seconds(), rate)
	}
	return answer, through, nil
}

// impersonationFlood has a ServiceAccount, whose token the cluster accepts but which may
// impersonate no one, call as a different user each time, from many workers: every call is
// refused (PermissionDenied, or Unavailable past the review rate), and the SubjectAccessReviews
// it costs the API server stay within their rate.
func (a *abuse) impersonationFlood(ctx context.Context) (string, string, error) {
	token, err := a.serviceAccountToken(ctx, "impostor")
	if err != nil {
		return "", "", err
	}
	t, took, before, after, err := a.flood(ctx, func(ctx context.Context, i int) error {
		callCtx := metadata.AppendToOutgoingContext(a.as(ctx, token), workspacev1.ImpersonateUserMetadata, fmt.Sprintf("victim-%d", i))
		_, err := a.api(fmt.Sprint("impostor-", i%a.o.workers)).List(callCtx, &workspacev1.ListWorkspacesRequest{})
		return err
	})
	if err != nil {
		return "", "", err
	}
	reviews := after["subjectaccessreviews"] - before["subjectaccessreviews"]
	answer := fmt.Sprintf("%s in %.1f s; SubjectAccessReviews %.0f", t, took.Seconds(), reviews)
	rate := float64(grpcapi.DefaultConfig().Tokens.ReviewsPerSecond)
	through := t.other("answered", codes.PermissionDenied, codes.Unavailable, codes.DeadlineExceeded)
	if reviews > 2*rate+rate*(took.Seconds()+1) { // a second's slack for the two clocks
		through = fmt.Sprintf("%.0f SubjectAccessReviews in %.1f s, over %.0f a second", reviews, took.Seconds(), rate)
	}
	return answer, through, nil
}

// serviceAccountToken makes a ServiceAccount in the operator's namespace and returns a token of it.
func (a *abuse) serviceAccountToken(ctx context.Context, name string) (string, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNS, Name: name}}
	if err := a.c.Create(ctx, sa); err != nil {
		return "", fmt.Errorf("creating ServiceAccount %s: %w", name, err)
	}
	return framework.ServiceAccountToken(ctx, a.c, sa)
}

// tokenSecretTTL is how often the API reads its token Secret at most (grpcapi's tokenTTL).
const tokenSecretTTL = 10 * time.Second

// waitFlood has one user hold as many create-and-wait style calls open as it can: a stopped
// workspace started by thousands of concurrent Start(wait=true) calls.
func (a *abuse) waitFlood(ctx context.Context) (string, string, error) {
	token := a.tokens["user0"]
	ws, err := a.someWorkspace(ctx, "user0")
	if err != nil {
		return "", "", err
	}
	if _, err := a.api("user0").Stop(a.as(ctx, token), &workspacev1.WorkspaceRef{Name: ws}); err != nil {
		return "", "", fmt.Errorf("stopping %s: %w", ws, err)
	}
	t := &tally{}
	callCtx, cancel := context.WithTimeout(a.as(ctx, token), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	for i := range a.o.waits {
		wg.Go(func() {
			// As many connections as it takes to have every call open at once.
			_, err := a.api(fmt.Sprint("waits-", i/callsPerConnection)).Start(callCtx, &workspacev1.StartWorkspaceRequest{Ref: &workspacev1.WorkspaceRef{Name: ws}, Wait: true})
			t.add(err)
		})
	}
	wg.Wait()
	return t.String(), t.none(codes.ResourceExhausted, "every call was let wait"), nil
}

// rotationFlood rotates one workspace's password as fast as the API answers, counting the API
// server's writes: each accepted rotation rewrites the password and restarts the IDE.
func (a *abuse) rotationFlood(ctx context.Context) (string, string, error) {
	token := a.tokens["user1"]
	ws, err := a.someWorkspace(ctx, "user1")
	if err != nil {
		return "", "", err
	}
	before, err := framework.APIWrites(ctx, a.kube.RESTClient())
	if err != nil {
		return "", "", err
	}
	t := &tally{}
	start := time.Now()
	for range a.o.rotations {
		_, err := a.api("user1").RotateAccess(a.as(ctx, token), &workspacev1.WorkspaceRef{Name: ws})
		t.add(err)
	}
	took := time.Since(start)
	after, err := framework.APIWrites(ctx, a.kube.RESTClient())
	if err != nil {
		return "", "", err
	}
	answer := fmt.Sprintf("%s in %.1f s; API server writes %.0f", t, took.Seconds(), framework.Sum(after)-framework.Sum(before))
	return answer, t.none(codes.ResourceExhausted, "every rotation was accepted"), nil
}

// someWorkspace is the name of one of the user's workspaces.
func (a *abuse) someWorkspace(ctx context.Context, user string) (string, error) {
	list, err := a.api(user).List(a.as(ctx, a.tokens[user]), &workspacev1.ListWorkspacesRequest{})
	if err != nil {
		return "", fmt.Errorf("listing workspaces: %w", err)
	}
	if len(list.Workspaces) == 0 {
		return "", fmt.Errorf("the user has no workspace")
	}
	return list.Workspaces[0].Name, nil
}

// parallelUntil runs fn(0..n-1) on workers goroutines until all ran or ctx ends.
func parallelUntil(ctx context.Context, workers, n int, fn func(i int)) {
	calls := make(chan int, n)
	for i := range n {
		calls <- i
	}
	close(calls)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range calls {
				if ctx.Err() != nil {
					return
				}
				fn(i)
			}
		})
	}
	wg.Wait()
}
