package access

import (
	"bytes"
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func TestPassword(t *testing.T) {
	key := bytes.Repeat([]byte{7}, KeyBytes)
	p := Password(key, "uid", 0)
	if len(p) != 32 || strings.ContainsAny(p, "+/=") {
		t.Errorf("password %q: want 32 URL-safe characters", p)
	}
	if Password(key, "uid", 0) != p {
		t.Error("the same inputs gave another password")
	}
	// The separators keep (uid "a1", rotation 0) and (uid "a", rotation 10) apart.
	if Password(key, "a1", 0) == Password(key, "a", 10) {
		t.Error("uid and rotation run into each other")
	}
}

func TestEnsureKey(t *testing.T) {
	ctx := context.Background()
	ref := types.NamespacedName{Namespace: "op", Name: "key"}
	c := fake.NewClientBuilder().Build()
	first, err := EnsureKey(ctx, c, ref)
	if err != nil || len(first) != KeyBytes {
		t.Fatalf("EnsureKey = %d bytes, %v; want a new %d-byte key", len(first), err, KeyBytes)
	}
	again, err := EnsureKey(ctx, c, ref)
	if err != nil || !bytes.Equal(first, again) {
		t.Fatalf("a second start got another key (%v): passwords would all change", err)
	}
	short := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "op", Name: "short"}, Data: map[string][]byte{keyField: []byte("tiny")}}
	c = fake.NewClientBuilder().WithObjects(short).Build()
	if _, err := EnsureKey(ctx, c, types.NamespacedName{Namespace: "op", Name: "short"}); err == nil || !strings.Contains(err.Error(), "data.key") {
		t.Errorf("a 4-byte key: err = %v, want a refusal naming data.key", err)
	}
}
