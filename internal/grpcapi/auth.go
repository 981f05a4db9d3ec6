package grpcapi

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// tokenStore maps bearer tokens to users from a Secret whose keys are user names and whose
// values are their tokens. It re-reads the Secret at most once per ttl, so a rotated token
// takes effect within ttl without watching every Secret in the cluster.
type tokenStore struct {
	reader client.Reader
	secret types.NamespacedName
	ttl    time.Duration
	now    func() time.Time

	mu      sync.Mutex
	digests map[string][sha256.Size]byte // user → sha256(token)
	fetched time.Time
}

// userFor returns the user whose token this is. Every stored token is compared, in constant
// time on equal-length digests, so the answer takes as long whichever user matches or none.
func (t *tokenStore) userFor(ctx context.Context, token string) (string, error) {
	digests, err := t.load(ctx)
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

func (t *tokenStore) load(ctx context.Context) (map[string][sha256.Size]byte, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.digests != nil && t.now().Sub(t.fetched) < t.ttl {
		return t.digests, nil
	}
	var s corev1.Secret
	if err := t.reader.Get(ctx, t.secret, &s); err != nil {
		if t.digests != nil {
			return t.digests, nil // keep serving with the last good tokens
		}
		return nil, fmt.Errorf("reading the token Secret %s: %w", t.secret, err)
	}
	digests := make(map[string][sha256.Size]byte, len(s.Data))
	for user, token := range s.Data {
		if tok := strings.TrimSpace(string(token)); tok != "" {
			digests[user] = sha256.Sum256([]byte(tok))
		}
	}
	t.digests, t.fetched = digests, t.now()
	return digests, nil
}

type userKey struct{}

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
	values := md.Get("authorization")
	if len(values) != 1 {
		return nil, status.Error(codes.Unauthenticated, "missing authorization metadata: send \"authorization: Bearer <token>\"")
	}
	token, ok := strings.CutPrefix(values[0], "Bearer ")
	if !ok || token == "" {
		return nil, status.Error(codes.Unauthenticated, "authorization must be \"Bearer <token>\"")
	}
	user, err := t.userFor(ctx, token)
	if err != nil {
		return nil, status.Error(codes.Unavailable, "cannot check tokens right now")
	}
	if user == "" {
		return nil, status.Error(codes.Unauthenticated, "unknown token")
	}
	return context.WithValue(ctx, userKey{}, user), nil
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
