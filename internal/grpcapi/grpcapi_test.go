package grpcapi

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
)

func TestTokenStore(t *testing.T) {
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "tokens"},
		Data: map[string][]byte{"alice": []byte("a-token\n"), "bob": []byte("b-token"), "empty": []byte("  ")}}
	c := fake.NewClientBuilder().WithObjects(secret).Build()
	now := time.Unix(0, 0)
	ts := newTestStore(c, func() time.Time { return now })
	ctx := context.Background()
	cases := map[string]string{"a-token": "alice", "b-token": "bob", "": "", "a-toke": "", "a-token\n": ""}
	for token, want := range cases {
		if got, err := ts.userFor(token); err != nil || got != want {
			t.Errorf("userFor(%q) = %q, %v; want %q", token, got, err, want)
		}
	}
	// A rotated token takes effect after the TTL, not before.
	secret.Data["alice"] = []byte("new-token")
	if err := c.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	if got, _ := ts.userFor("a-token"); got != "alice" {
		t.Errorf("within the TTL the old token gives %q", got)
	}
	now = now.Add(2 * time.Minute)
	if got, _ := ts.userFor("a-token"); got != "" {
		t.Errorf("after the TTL the old token still gives %q", got)
	}
	if got, _ := ts.userFor("new-token"); got != "alice" {
		t.Errorf("the new token gives %q", got)
	}
}

func TestAuthenticate(t *testing.T) {
	c := fake.NewClientBuilder().WithObjects(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "tokens"},
		Data: map[string][]byte{"alice": []byte("a-token")}}).Build()
	ts := newTestStore(c, time.Now)
	in := func(md ...string) context.Context {
		return metadata.NewIncomingContext(context.Background(), metadata.Pairs(md...))
	}
	ctx, err := ts.authenticate(in("authorization", "Bearer a-token"), "/cloudspace.v1.WorkspaceService/List")
	if err != nil || userFrom(ctx) != "alice" {
		t.Errorf("good token: user %q, %v", userFrom(ctx), err)
	}
	for _, md := range [][]string{{}, {"authorization", "Basic a-token"}, {"authorization", "Bearer nope"}} {
		if _, err := ts.authenticate(in(md...), "/pb.CloudIdeService/deleteSpace"); status.Code(err) != codes.Unauthenticated {
			t.Errorf("metadata %v: %v, want Unauthenticated", md, err)
		}
	}
	if _, err := ts.authenticate(in(), "/grpc.health.v1.Health/Check"); err != nil {
		t.Errorf("health needs no token: %v", err)
	}
	// Before an admin gave the API its users, a caller is told so, and not the Secret's name.
	none := newTestStore(fake.NewClientBuilder().Build(), time.Now)
	_, err = none.authenticate(in("authorization", "Bearer a-token"), "/cloudspace.v1.WorkspaceService/List")
	if st := status.Convert(err); st.Code() != codes.Unavailable || !strings.Contains(st.Message(), "an admin must create its token Secret") || strings.Contains(st.Message(), "tokens") {
		t.Errorf("no token Secret: %v, want Unavailable saying an admin must create it, without its name", err)
	}
}

func TestValidate(t *testing.T) {
	w := &workspaces{cfg: testSettings(t)}
	cases := []struct {
		sp    spec
		field string
	}{
		{spec{name: "ok"}, ""},
		{spec{name: "1abc"}, "workspace.name"},
		// As the tutorial's web backend names them (52 characters), and a DNS label's most (63).
		{spec{name: "ws-0123456789abcdef01234567-0123456789abcdef01234567"}, ""},
		{spec{name: "ws-0123456789abcdef01234567-0123456789abcdef01234567-abcdefghi1"}, ""},
		{spec{name: "ws-0123456789abcdef01234567-0123456789abcdef01234567-abcdefghij1"}, "workspace.name"},
		{spec{name: "ok", namespace: "elsewhere"}, "workspace.namespace"},
		{spec{name: "ok", storage: "ten gigs"}, "workspace.storage"},
	}
	for _, tc := range cases {
		sp := tc.sp
		err := w.validate(&sp, v1Fields)
		if tc.field == "" {
			if err != nil || sp.namespace != "cloudspace-workspaces" {
				t.Errorf("%+v: %v (namespace %q), want valid with the default namespace", tc.sp, err, sp.namespace)
			}
			continue
		}
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), tc.field+":") {
			t.Errorf("%+v: %v, want InvalidArgument naming %s", tc.sp, err, tc.field)
		}
	}
}

func TestToStatus(t *testing.T) {
	gr := schema.GroupResource{Group: "infra.cloudspace.dev", Resource: "workspaces"}
	cases := []struct {
		err  error
		code codes.Code
	}{
		{apierrors.NewNotFound(gr, "x"), codes.NotFound},
		{apierrors.NewAlreadyExists(gr, "x"), codes.AlreadyExists},
		{apierrors.NewForbidden(gr, "x", errors.New("no")), codes.PermissionDenied},
		{apierrors.NewConflict(gr, "x", errors.New("stale")), codes.Aborted},
		{context.DeadlineExceeded, codes.DeadlineExceeded},
		{status.Error(codes.ResourceExhausted, "quota"), codes.ResourceExhausted},
		{errors.New("boom"), codes.Internal},
	}
	for _, tc := range cases {
		if got := status.Code(toStatus(tc.err, "doing")); got != tc.code {
			t.Errorf("toStatus(%v) = %s, want %s", tc.err, got, tc.code)
		}
	}
	// A served namespace that nobody created is the admin's to fix, and the answer says so.
	err := toStatus(apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "ides"), "creating workspace ide1")
	if st := status.Convert(err); st.Code() != codes.FailedPrecondition || !strings.Contains(st.Message(), "namespace ides, which the API serves, does not exist: an admin must create it") {
		t.Errorf("a missing namespace: %v, want FailedPrecondition saying an admin must create it", err)
	}
}

func TestNotifierPokesOnlyMatchingSubscribers(t *testing.T) {
	n := newNotifier()
	alice, stopA := n.subscribe(func(w *infrav1alpha1.Workspace) bool { return w.Spec.Owner == "alice" })
	bob, stopB := n.subscribe(func(w *infrav1alpha1.Workspace) bool { return w.Spec.Owner == "bob" })
	defer stopB()
	ws := workspaceEvent(t, map[string]any{"owner": "alice"})
	n.notify(workspaceEvent(t, map[string]any{"owner": "alice", "startTimeout": "soon"})) // does not decode: no one reads it
	select {
	case <-alice:
		t.Fatal("alice was poked for a Workspace that does not decode")
	default:
	}
	n.notify(ws)
	n.notify(ws) // collapses into the pending poke
	select {
	case <-alice:
	default:
		t.Fatal("alice was not poked")
	}
	select {
	case <-alice:
		t.Fatal("two pokes were queued; they must collapse")
	case <-bob:
		t.Fatal("bob was poked for alice's workspace")
	default:
	}
	stopA()
	n.notify(ws) // must not block or panic with no subscriber left
}

// workspaceEvent is a Workspace with spec as the informer hands it out: unstructured.
func workspaceEvent(t *testing.T, spec map[string]any) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(workspaceGVK)
	u.SetNamespace("ides")
	u.SetName("ws")
	return u
}
