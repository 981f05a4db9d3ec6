package grpcapi

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cloudspace-dev/cloudspace-operator/pkg/workspacev1"
)

// tokenStore maps bearer tokens to users from a Secret whose keys are user names and whose
// values are their tokens. It re-reads the Secret at most once per ttl, whether the last read
// worked or not, so a rotated token takes effect within ttl and an unreadable Secret costs one
// GET per ttl whatever the request rate. It fails closed: tokens last read longer than
// maxStaleness ago are not served, and a token two users share works for neither.
type tokenStore struct {
	reader       client.Reader
	secret       types.NamespacedName
	ttl          time.Duration
	maxStaleness time.Duration
	now          func() time.Time
	log          logr.Logger

	mu        sync.Mutex
	digests   map[string][sha256.Size]byte // user → sha256(token)
	fetched   time.Time                    // the last read that worked
	attempted time.Time                    // the last read, whether it worked or not
	readErr   error                        // why the last read failed; nil when it worked
	shared    string                       // the users last reported for sharing a token

	// cluster identifies the tokens the Secret does not know, with the cluster's API server;
	// nil: only the Secret's.
	cluster *clusterAuth
}

// tokenTTL is the API's tokenStore.ttl: a rotated token takes effect within 10 s, and an
// unreadable Secret costs one GET per 10 s.
const tokenTTL = 10 * time.Second

// tokenReadTimeout bounds one read of the Secret; callers wait for it under the store's lock.
const tokenReadTimeout = 5 * time.Second

// userFor returns the user whose token this is. Every stored token is compared, in constant
// time on equal-length digests, so the answer takes as long whichever user matches or none.
func (t *tokenStore) userFor(token string) (string, error) {
	digests, err := t.load()
	if err != nil {
		return "", err
	}
	given := sha256.Sum256([]byte(token))
	user := ""
	for u, d := range digests {
		if subtle.ConstantTimeCompare(given[:], d[:]) == 1 {
			user = u
		}
	}
	return user, nil
}

// load returns the current tokens, reading the Secret when the last read is a ttl old.
func (t *tokenStore) load() (map[string][sha256.Size]byte, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	if t.attempted.IsZero() || now.Sub(t.attempted) >= t.ttl {
		t.attempted = now
		t.read(now)
	}
	if t.digests == nil || now.Sub(t.fetched) > t.maxStaleness {
		return nil, fmt.Errorf("the token Secret %s was not read for over %s: %w", t.secret, t.maxStaleness, t.readErr)
	}
	return t.digests, nil
}

// read fetches the Secret; on failure the last good tokens stay, until they are too stale.
func (t *tokenStore) read(now time.Time) {
	ctx, cancel := context.WithTimeout(context.Background(), tokenReadTimeout)
	defer cancel()
	var s corev1.Secret
	if err := t.reader.Get(ctx, t.secret, &s); err != nil {
		t.readErr = fmt.Errorf("reading the token Secret %s: %w", t.secret, err)
		t.log.Error(err, "cannot read the token Secret; serving the last tokens until they are stale",
			"secret", t.secret.String(), "maxStale", t.maxStaleness.String())
		return
	}
	digests, shared := digestsOf(s.Data)
	if key := strings.Join(shared, ","); key != t.shared && key != "" {
		t.log.Error(nil, "users share a token: it works for none of them until each has their own",
			"secret", t.secret.String(), "users", shared)
	}
	t.digests, t.fetched, t.readErr, t.shared = digests, now, nil, strings.Join(shared, ",")
}

// digestsOf hashes each user's token. Users whose tokens are equal are left out, and returned:
// such a token cannot say who is calling.
func digestsOf(data map[string][]byte) (map[string][sha256.Size]byte, []string) {
	byDigest := map[[sha256.Size]byte][]string{}
	for user, token := range data {
		if tok := strings.TrimSpace(string(token)); tok != "" {
			d := sha256.Sum256([]byte(tok))
			byDigest[d] = append(byDigest[d], user)
		}
	}
	digests := make(map[string][sha256.Size]byte, len(data))
	var shared []string
	for d, users := range byDigest {
		if len(users) > 1 {
			shared = append(shared, users...)
			continue
		}
		digests[users[0]] = d
	}
	slices.Sort(shared)
	return digests, shared
}

type userKey struct{}

// actorKey holds the cluster username of a caller acting for the call's user (impersonation).
type actorKey struct{}

// actorFrom is who made a call for its user, "" when the user called themselves.
func actorFrom(ctx context.Context) string {
	a, _ := ctx.Value(actorKey{}).(string)
	return a
}

// userFrom returns the authenticated user of a call.
func userFrom(ctx context.Context) string {
	u, _ := ctx.Value(userKey{}).(string)
	return u
}

// public methods need no token: health checks and reflection.
func public(method string) bool {
	return strings.HasPrefix(method, "/grpc.health.v1.Health/") || strings.HasPrefix(method, "/grpc.reflection.")
}

func (t *tokenStore) authenticate(ctx context.Context, method string) (context.Context, error) {
	if public(method) {
		return ctx, nil
	}
	md, _ := metadata.FromIncomingContext(ctx)
	token, err := bearerToken(md)
	if err != nil {
		return nil, err
	}
	impersonate := md.Get(workspacev1.ImpersonateUserMetadata)
	user, staticErr := t.userFor(token)
	if user != "" {
		if len(impersonate) > 0 {
			return nil, status.Error(codes.PermissionDenied, "only a cluster identity may act for another user: the token Secret's users cannot")
		}
		return context.WithValue(ctx, userKey{}, user), nil
	}
	if t.cluster == nil {
		return nil, staticAnswer(staticErr)
	}
	id, err := t.cluster.identify(ctx, token)
	switch {
	case errors.Is(err, errTooManyReviews):
		return nil, status.Error(codes.Unavailable, "too many new tokens at once: retry in a second")
	case err != nil:
		t.log.Error(err, "cannot review a token with the API server")
		return nil, status.Error(codes.Unavailable, "cannot check tokens right now")
	case id == nil:
		return nil, staticAnswer(staticErr)
	case len(impersonate) == 0:
		return context.WithValue(ctx, userKey{}, OwnerOf(id.username)), nil
	}
	return t.impersonating(ctx, id, impersonate)
}

// bearerToken is the call's bearer token.
func bearerToken(md metadata.MD) (string, error) {
	values := md.Get("authorization")
	if len(values) != 1 {
		return "", status.Error(codes.Unauthenticated, "missing authorization metadata: send \"authorization: Bearer <token>\"")
	}
	token, ok := strings.CutPrefix(values[0], "Bearer ")
	if !ok || token == "" {
		return "", status.Error(codes.Unauthenticated, "authorization must be \"Bearer <token>\"")
	}
	return token, nil
}

// staticAnswer is the answer to a token neither the token Secret nor the cluster knows, err
// being why the Secret could not say (nil: it could).
func staticAnswer(err error) error {
	switch {
	case err == nil:
		return status.Error(codes.Unauthenticated, "unknown token")
	case apierrors.IsNotFound(err):
		// The Secret's name is the admin's business, not a caller's.
		return status.Error(codes.Unavailable, "the API has no users yet: an admin must create its token Secret (README, \"After the install\")")
	}
	return status.Error(codes.Unavailable, "cannot check tokens right now")
}

// impersonating is the call as the user the caller names, when the cluster lets the caller
// impersonate them (Kubernetes' own rule, as for kubectl --as): the workspaces, quotas and
// limits are then the user's, and the caller is kept for the record (actorFrom).
func (t *tokenStore) impersonating(ctx context.Context, caller *clusterIdentity, users []string) (context.Context, error) {
	if len(users) != 1 || users[0] == "" {
		return nil, status.Errorf(codes.InvalidArgument, "%s must name one user", workspacev1.ImpersonateUserMetadata)
	}
	allowed, err := t.cluster.mayImpersonate(ctx, caller, users[0])
	switch {
	case errors.Is(err, errTooManyReviews):
		return nil, status.Error(codes.Unavailable, "too many new callers at once: retry in a second")
	case err != nil:
		t.log.Error(err, "cannot review an impersonation with the API server", "caller", caller.username, "user", users[0])
		return nil, status.Error(codes.Unavailable, "cannot check impersonation right now")
	case !allowed:
		return nil, status.Errorf(codes.PermissionDenied, "%s may not impersonate user %q (the cluster's RBAC: verb impersonate on users)", caller.username, users[0])
	}
	ctx = context.WithValue(ctx, actorKey{}, caller.username)
	return context.WithValue(ctx, userKey{}, OwnerOf(users[0])), nil
}

func (t *tokenStore) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	ctx, err := t.authenticate(ctx, info.FullMethod)
	if err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

func (t *tokenStore) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	ctx, err := t.authenticate(ss.Context(), info.FullMethod)
	if err != nil {
		return err
	}
	return handler(srv, &authedStream{ServerStream: ss, ctx: ctx})
}

type authedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *authedStream) Context() context.Context { return s.ctx }
