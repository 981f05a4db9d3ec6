package grpcapi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	"golang.org/x/time/rate"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// clusterIdentity is who the cluster's API server says a bearer token is.
type clusterIdentity struct {
	username string
	uid      string
	groups   []string
	extra    map[string]authorizationv1.ExtraValue
}

// errTooManyReviews is a review the rate bound refused.
var errTooManyReviews = errors.New("too many token and access reviews at once")

// clusterAuth asks the cluster's API server who a bearer token is (TokenReview) and whether a
// caller may impersonate a user (SubjectAccessReview, verb impersonate on users). Each answer is
// kept for ttl, so that a client's calls cost one review per ttl; calls that need the same
// answer at once share one review; and reviews are bounded in rate, a call waiting at most
// maxReviewWait for its place: a flood of made-up tokens costs the API server no more, and a
// portal's first burst of calls for many users waits briefly rather than fails.
type clusterAuth struct {
	c       client.Client
	ttl     time.Duration
	limiter *rate.Limiter
	now     func() time.Time
	// after is time.After; tests make waits instant.
	after func(time.Duration) <-chan time.Time

	flight  singleflight.Group
	mu      sync.Mutex
	answers map[[sha256.Size]byte]cachedAnswer
}

// cachedAnswer is one review's answer, until expires.
type cachedAnswer struct {
	identity *clusterIdentity // a TokenReview's: nil when the token was refused
	allowed  bool             // a SubjectAccessReview's
	expires  time.Time
}

// maxCachedAnswers bounds the answers kept: past it, expired ones go, then any.
const maxCachedAnswers = 10000

// reviewTTL is how long a review's answer is kept: a revoked token or a withdrawn right is
// refused within 10 s, and a client's calls cost one review per 10 s.
const reviewTTL = 10 * time.Second

// reviewTimeout bounds one review; maxReviewWait, how long a call waits for a place in the rate.
const (
	reviewTimeout = 5 * time.Second
	maxReviewWait = 2 * time.Second
)

func newClusterAuth(c client.Client, ttl time.Duration, perSecond int, now func() time.Time) *clusterAuth {
	return &clusterAuth{c: c, ttl: ttl, limiter: rate.NewLimiter(rate.Limit(perSecond), 2*perSecond), now: now, after: time.After,
		answers: map[[sha256.Size]byte]cachedAnswer{}}
}

// identify is who token is, or nil when the API server does not accept it.
func (a *clusterAuth) identify(ctx context.Context, token string) (*clusterIdentity, error) {
	ans, err := a.answer(ctx, sha256.Sum256([]byte("token\x00"+token)), func(ctx context.Context) (cachedAnswer, error) {
		review := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}
		if err := a.c.Create(ctx, review); err != nil {
			return cachedAnswer{}, fmt.Errorf("reviewing a token: %w", err)
		}
		st := review.Status
		if !st.Authenticated || st.User.Username == "" {
			return cachedAnswer{}, nil
		}
		id := &clusterIdentity{username: st.User.Username, uid: st.User.UID, groups: st.User.Groups, extra: map[string]authorizationv1.ExtraValue{}}
		for k, v := range st.User.Extra {
			id.extra[k] = authorizationv1.ExtraValue(v)
		}
		return cachedAnswer{identity: id}, nil
	})
	return ans.identity, err
}

// mayImpersonate is whether the cluster lets caller impersonate the user.
func (a *clusterAuth) mayImpersonate(ctx context.Context, caller *clusterIdentity, user string) (bool, error) {
	key := sha256.Sum256([]byte("impersonate\x00" + caller.username + "\x00" + caller.uid + "\x00" +
		strings.Join(caller.groups, "\x00") + "\x00\x00" + user))
	ans, err := a.answer(ctx, key, func(ctx context.Context) (cachedAnswer, error) {
		review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: caller.username, UID: caller.uid, Groups: caller.groups, Extra: caller.extra,
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "impersonate", Resource: "users", Name: user},
		}}
		if err := a.c.Create(ctx, review); err != nil {
			return cachedAnswer{}, fmt.Errorf("reviewing impersonation: %w", err)
		}
		return cachedAnswer{allowed: review.Status.Allowed}, nil
	})
	return ans.allowed, err
}

// answer is the answer kept under key, or review's, asked once for every caller that needs it
// meanwhile and kept.
func (a *clusterAuth) answer(ctx context.Context, key [sha256.Size]byte, review func(context.Context) (cachedAnswer, error)) (cachedAnswer, error) {
	if ans, ok := a.cached(key); ok {
		return ans, nil
	}
	v, err, _ := a.flight.Do(string(key[:]), func() (any, error) {
		if ans, ok := a.cached(key); ok {
			return ans, nil
		}
		// Not the first caller's to cancel: the others wait for the same review.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reviewTimeout)
		defer cancel()
		if err := a.place(ctx); err != nil {
			return cachedAnswer{}, err
		}
		ans, err := review(ctx)
		if err == nil {
			ans = a.keep(key, ans)
		}
		return ans, err
	})
	ans, _ := v.(cachedAnswer)
	return ans, err
}

// place takes a place in the rate of reviews, waiting for it at most maxReviewWait.
func (a *clusterAuth) place(ctx context.Context) error {
	now := a.now()
	r := a.limiter.ReserveN(now, 1)
	delay := r.DelayFrom(now)
	if !r.OK() || delay > maxReviewWait {
		r.CancelAt(now)
		return errTooManyReviews
	}
	if delay == 0 {
		return nil
	}
	select {
	case <-a.after(delay):
		return nil
	case <-ctx.Done():
		r.CancelAt(a.now())
		return ctx.Err()
	}
}

func (a *clusterAuth) cached(key [sha256.Size]byte) (cachedAnswer, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	ans, ok := a.answers[key]
	return ans, ok && a.now().Before(ans.expires)
}

// keep keeps ans under key for ttl, and returns it as kept.
func (a *clusterAuth) keep(key [sha256.Size]byte, ans cachedAnswer) cachedAnswer {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now()
	if len(a.answers) >= maxCachedAnswers {
		for k, v := range a.answers {
			if !now.Before(v.expires) || len(a.answers) >= maxCachedAnswers {
				delete(a.answers, k)
			}
		}
	}
	ans.expires = now.Add(a.ttl)
	a.answers[key] = ans
	return ans
}

// ownerPattern is what a Workspace's spec.owner may be (its CRD's rule), at most 63 characters.
var ownerPattern = regexp.MustCompile(`^[a-z0-9]([-a-z0-9._]*[a-z0-9])?$`)

// mappedSuffix ends every owner mapped from a name that is not one as it is; no name that is
// an owner as it is ends so (OwnerOf).
var mappedSuffix = regexp.MustCompile(`-h[0-9a-f]{16}$`)

// OwnerOf is the workspace owner a cluster username stands for. A username that is a valid owner
// (lower-case letters, digits, '-', '.', '_', at most 63 characters, not ending in "-h" and 16
// hex digits) is its own owner: alice is alice, as for the token Secret's users. Any other is
// mapped: lower-cased, every other character made '-', cut to 44 characters, and followed by
// "-h" and the first 16 hex digits of the SHA-256 of the whole username, so that two usernames
// never share an owner: system:serviceaccount:web:portal is
// system-serviceaccount-web-portal-h<16 hex>.
func OwnerOf(username string) string {
	if len(username) <= 63 && ownerPattern.MatchString(username) && !mappedSuffix.MatchString(username) {
		return username
	}
	var b strings.Builder
	for _, r := range strings.ToLower(username) {
		if b.Len() == 44 {
			break
		}
		if r < 128 && (r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	base := strings.Trim(b.String(), "-._")
	if base == "" {
		base = "user"
	}
	sum := sha256.Sum256([]byte(username))
	return base + "-h" + hex.EncodeToString(sum[:8])
}
