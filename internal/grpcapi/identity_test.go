package grpcapi

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/cloudspace-dev/cloudspace-operator/pkg/workspacev1"
)

func TestOwnerOf(t *testing.T) {
	cases := map[string]string{
		"alice":                            "alice",
		"dev.bob_2":                        "dev.bob_2",
		"system:serviceaccount:web:portal": "system-serviceaccount-web-portal-h",
		"Alice@Example.com":                "alice-example.com-h",
		"bob-h0123456789abcdef":            "bob-h0123456789abcdef-h", // looks mapped: mapped again
		"":                                 "user-h",
		"élodie":                           "lodie-h",
		strings.Repeat("a", 64):            strings.Repeat("a", 44) + "-h",
	}
	seen := map[string]string{}
	for name, wantPrefix := range cases {
		got := OwnerOf(name)
		if got != wantPrefix && (!strings.HasPrefix(got, wantPrefix) || !strings.HasSuffix(wantPrefix, "-h") || len(got) != len(wantPrefix)+16) {
			t.Errorf("OwnerOf(%q) = %q, want %q (and 16 hex digits when it ends in -h)", name, got, wantPrefix)
		}
		if len(got) > 63 || !ownerPattern.MatchString(got) || len(validation.IsValidLabelValue(got)) > 0 {
			t.Errorf("OwnerOf(%q) = %q is no valid owner", name, got)
		}
		if other, ok := seen[got]; ok {
			t.Errorf("OwnerOf(%q) = OwnerOf(%q) = %q", name, other, got)
		}
		seen[got] = name
		if again := OwnerOf(name); again != got {
			t.Errorf("OwnerOf(%q) is %q, then %q", name, got, again)
		}
	}
	// Two usernames that differ only where the mapping puts '-' still have owners of their own.
	if a, b := OwnerOf("a:b"), OwnerOf("a/b"); a == b || OwnerOf("a-b") == a {
		t.Errorf("a:b, a/b and a-b share an owner: %q, %q, %q", a, b, OwnerOf("a-b"))
	}
}

// reviewer is a fake API server answering reviews: tokens it knows, impersonations it allows,
// and how many reviews it was asked for.
type reviewer struct {
	users   map[string]string // token → username
	allowed map[string]bool   // "caller>user" → allowed
	// release, when not nil, holds every review until it is closed.
	release chan struct{}

	mu      sync.Mutex
	reviews int
}

func (r *reviewer) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reviews
}

func (r *reviewer) client() client.Client {
	return fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
		Create: func(_ context.Context, _ client.WithWatch, obj client.Object, _ ...client.CreateOption) error {
			r.mu.Lock()
			r.reviews++
			r.mu.Unlock()
			if r.release != nil {
				<-r.release
			}
			switch o := obj.(type) {
			case *authenticationv1.TokenReview:
				if u, ok := r.users[o.Spec.Token]; ok {
					o.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: u}}
				}
			case *authorizationv1.SubjectAccessReview:
				o.Status.Allowed = r.allowed[o.Spec.User+">"+o.Spec.ResourceAttributes.Name] && o.Spec.ResourceAttributes.Verb == "impersonate" &&
					o.Spec.ResourceAttributes.Resource == "users"
			default:
				return errors.New("not a review")
			}
			return nil
		},
	}).Build()
}

// TestClusterAuthKeepsAnswersAndBoundsReviews: a token and an impersonation cost one review
// per reviewTTL each, a refused token too; past the burst a review waits for its place, up to
// maxReviewWait, and past that it is refused, not asked.
func TestClusterAuthKeepsAnswersAndBoundsReviews(t *testing.T) {
	r := &reviewer{users: map[string]string{"sa-token": "system:serviceaccount:web:portal"}, allowed: map[string]bool{"system:serviceaccount:web:portal>alice": true}}
	now := time.Unix(1000, 0)
	a := newClusterAuth(r.client(), reviewTTL, 2, func() time.Time { return now })
	var waited []time.Duration
	a.after = func(d time.Duration) <-chan time.Time {
		waited = append(waited, d)
		c := make(chan time.Time, 1)
		c <- now
		return c
	}
	ctx := context.Background()
	for range 3 {
		id, err := a.identify(ctx, "sa-token")
		if err != nil || id == nil || id.username != "system:serviceaccount:web:portal" {
			t.Fatalf("identify = %+v, %v", id, err)
		}
		if ok, err := a.mayImpersonate(ctx, id, "alice"); !ok || err != nil {
			t.Fatalf("may impersonate alice = %v, %v", ok, err)
		}
		if ok, err := a.mayImpersonate(ctx, id, "bob"); ok || err != nil {
			t.Fatalf("may impersonate bob = %v, %v", ok, err)
		}
	}
	if r.count() != 3 || len(waited) != 0 {
		t.Errorf("%d reviews (%d waits) for three rounds of the same calls, want 3 and none", r.count(), len(waited))
	}
	// The burst of 4 has one place left; at 2 a second, four more wait 0.5 s to 2 s; the next
	// would wait 2.5 s, over maxReviewWait.
	for i := range 5 {
		if id, err := a.identify(ctx, fmt.Sprint("made-up-", i)); id != nil || err != nil {
			t.Fatalf("made-up token %d: %+v, %v; want refused", i, id, err)
		}
	}
	if _, err := a.identify(ctx, "one-too-many"); !errors.Is(err, errTooManyReviews) || r.count() != 8 {
		t.Errorf("past the rate: %v after %d reviews, want errTooManyReviews after 8", err, r.count())
	}
	if want := []time.Duration{500 * time.Millisecond, time.Second, 1500 * time.Millisecond, 2 * time.Second}; !slices.Equal(waited, want) {
		t.Errorf("waits %v, want %v", waited, want)
	}
	// An answer kept past reviewTTL is asked again (the rate has refilled meanwhile).
	now = now.Add(reviewTTL)
	if id, err := a.identify(ctx, "sa-token"); id == nil || err != nil || r.count() != 9 {
		t.Errorf("after reviewTTL: %+v, %v after %d reviews, want it reviewed again (9)", id, err, r.count())
	}
}

// TestClusterAuthAsksOnceForCallersAtOnce: a portal's first calls, all at once with the same
// token, cost one review, and all get its answer.
func TestClusterAuthAsksOnceForCallersAtOnce(t *testing.T) {
	r := &reviewer{users: map[string]string{"sa-token": "portal"}, release: make(chan struct{})}
	a := newClusterAuth(r.client(), reviewTTL, 1, time.Now)
	var wg sync.WaitGroup
	ids := make([]*clusterIdentity, 50)
	for i := range ids {
		wg.Go(func() { ids[i], _ = a.identify(context.Background(), "sa-token") })
	}
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return r.count() > 0, nil
	})
	if err != nil {
		t.Fatalf("no review asked: %v", err)
	}
	close(r.release)
	wg.Wait()
	for i, id := range ids {
		if id == nil || id.username != "portal" {
			t.Fatalf("caller %d: %+v, want portal", i, id)
		}
	}
	if r.count() != 1 {
		t.Errorf("%d reviews for 50 callers at once, want 1", r.count())
	}
}

// TestAuthenticateClusterIdentities: a token the Secret does not know is the cluster's user it
// names; a cluster identity acts for another user only where the cluster allows it, and a
// token Secret user never does.
func TestAuthenticateClusterIdentities(t *testing.T) {
	r := &reviewer{users: map[string]string{"sa-token": "system:serviceaccount:web:portal", "dev-token": "dev"},
		allowed: map[string]bool{"system:serviceaccount:web:portal>alice": true}}
	secret := fake.NewClientBuilder().WithObjects(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "tokens"},
		Data: map[string][]byte{"bob": []byte("b-token")}}).Build()
	ts := newTestStore(secret, time.Now)
	ts.cluster = newClusterAuth(r.client(), reviewTTL, 100, time.Now)
	call := func(md ...string) (context.Context, error) {
		return ts.authenticate(metadata.NewIncomingContext(context.Background(), metadata.Pairs(md...)), "/cloudspace.v1.WorkspaceService/List")
	}
	cases := []struct {
		md          []string
		user, actor string
		code        codes.Code
	}{
		{[]string{"authorization", "Bearer b-token"}, "bob", "", codes.OK},
		{[]string{"authorization", "Bearer dev-token"}, "dev", "", codes.OK},
		{[]string{"authorization", "Bearer sa-token"}, OwnerOf("system:serviceaccount:web:portal"), "", codes.OK},
		{[]string{"authorization", "Bearer sa-token", workspacev1.ImpersonateUserMetadata, "alice"}, "alice", "system:serviceaccount:web:portal", codes.OK},
		{[]string{"authorization", "Bearer sa-token", workspacev1.ImpersonateUserMetadata, "carol"}, "", "", codes.PermissionDenied},
		{[]string{"authorization", "Bearer dev-token", workspacev1.ImpersonateUserMetadata, "alice"}, "", "", codes.PermissionDenied},
		{[]string{"authorization", "Bearer b-token", workspacev1.ImpersonateUserMetadata, "alice"}, "", "", codes.PermissionDenied},
		{[]string{"authorization", "Bearer sa-token", workspacev1.ImpersonateUserMetadata, "alice", workspacev1.ImpersonateUserMetadata, "bob"}, "", "", codes.InvalidArgument},
		{[]string{"authorization", "Bearer made-up"}, "", "", codes.Unauthenticated},
	}
	for _, tc := range cases {
		ctx, err := call(tc.md...)
		var user, actor string
		if err == nil {
			user, actor = userFrom(ctx), actorFrom(ctx)
		}
		if status.Code(err) != tc.code || user != tc.user || actor != tc.actor {
			t.Errorf("%v: %v (user %q, actor %q), want %s as %q for %q", tc.md, err, user, actor, tc.code, tc.user, tc.actor)
		}
	}
}
