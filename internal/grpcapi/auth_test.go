package grpcapi

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// newTestStore is a token store over reader with a one-minute TTL and five-minute staleness.
func newTestStore(reader client.Reader, now func() time.Time) *tokenStore {
	return &tokenStore{reader: reader, secret: types.NamespacedName{Namespace: "ops", Name: "tokens"},
		ttl: time.Minute, maxStaleness: 5 * time.Minute, now: now, log: logr.Discard()}
}

// flakySecret serves the token Secret until broken is set, and counts the reads.
type flakySecret struct {
	client.WithWatch
	broken bool
	reads  int
}

func newFlakySecret(data map[string][]byte) *flakySecret {
	f := &flakySecret{}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "tokens"}, Data: data}
	f.WithWatch = fake.NewClientBuilder().WithObjects(secret).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			f.reads++
			if f.broken {
				return errors.New("connection refused")
			}
			return c.Get(ctx, key, obj, opts...)
		},
	}).Build()
	return f
}

// TestTokensFailClosedWhenStale: while the Secret cannot be read, the last tokens are served
// only up to the staleness bound; after it, calls are refused, not served forever.
func TestTokensFailClosedWhenStale(t *testing.T) {
	now := time.Unix(0, 0)
	f := newFlakySecret(map[string][]byte{"alice": []byte("a-token")})
	ts := newTestStore(f, func() time.Time { return now })
	if u, err := ts.userFor("a-token"); u != "alice" || err != nil {
		t.Fatalf("first read: %q, %v", u, err)
	}
	f.broken = true
	now = now.Add(4 * time.Minute)
	if u, err := ts.userFor("a-token"); u != "alice" || err != nil {
		t.Errorf("4 minutes after the last good read: %q, %v; want the last tokens", u, err)
	}
	now = now.Add(2 * time.Minute)
	if u, err := ts.userFor("a-token"); err == nil {
		t.Errorf("6 minutes after the last good read the token still gives %q; want an error", u)
	}
	f.broken = false
	now = now.Add(time.Minute)
	if u, err := ts.userFor("a-token"); u != "alice" || err != nil {
		t.Errorf("after the Secret is readable again: %q, %v", u, err)
	}
}

// TestTokenReadFailuresAreNotRetriedPerCall: a failing Secret is read once per TTL, however
// many calls arrive.
func TestTokenReadFailuresAreNotRetriedPerCall(t *testing.T) {
	now := time.Unix(0, 0)
	f := newFlakySecret(nil)
	f.broken = true
	ts := newTestStore(f, func() time.Time { return now })
	for range 1000 {
		if _, err := ts.userFor("x"); err == nil {
			t.Fatal("a call was served although the Secret was never read")
		}
	}
	now = now.Add(30 * time.Second)
	for range 1000 {
		_, _ = ts.userFor("x")
	}
	if f.reads != 1 {
		t.Errorf("%d reads of a failing Secret within one TTL, want 1", f.reads)
	}
	now = now.Add(31 * time.Second)
	_, _ = ts.userFor("x")
	if f.reads != 2 {
		t.Errorf("%d reads after the TTL, want 2", f.reads)
	}
}

// TestSharedTokenWorksForNobody: a token two users share cannot say who is calling, so it is
// refused for both; the other users are unaffected.
func TestSharedTokenWorksForNobody(t *testing.T) {
	f := newFlakySecret(map[string][]byte{"alice": []byte("same"), "mallory": []byte("same\n"), "bob": []byte("b-token")})
	ts := newTestStore(f, time.Now)
	if u, err := ts.userFor("same"); u != "" || err != nil {
		t.Errorf("a shared token authenticates as %q (%v); want nobody", u, err)
	}
	if u, _ := ts.userFor("b-token"); u != "bob" {
		t.Errorf("bob's own token gives %q", u)
	}
	if _, shared := digestsOf(map[string][]byte{"a": []byte("t"), "b": []byte("t"), "c": []byte("u")}); len(shared) != 2 || shared[0] != "a" || shared[1] != "b" {
		t.Errorf("shared = %v, want [a b]", shared)
	}
}
