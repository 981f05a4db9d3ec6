// Package access derives the password of each workspace's IDE from one operator key, so the
// chart renders it from the workspace alone (rendering stays a pure function) and the API can
// hand it to the owner without reading any Secret of the user's namespace.
package access

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// KeyBytes is the size of the operator key.
const KeyBytes = 32

// keyField is the key Secret's data key.
const keyField = "key"

// Password is the IDE password of the workspace with this UID at this rotation: 32 URL-safe
// characters (192 bits) of HMAC-SHA256. Bumping the rotation gives an unrelated password; the
// same inputs always give the same one.
func Password(key []byte, uid types.UID, rotation int64) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte("cloudspace.dev/workspace-access\x00"))
	mac.Write([]byte(uid))
	mac.Write([]byte{0})
	mac.Write([]byte(strconv.FormatInt(rotation, 10)))
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil)[:24])
}

// The key Secret lives in the operator's namespace.
// +kubebuilder:rbac:groups="",namespace=system,resources=secrets,verbs=get;create

// EnsureKey reads the operator key from the Secret at ref, creating the Secret with a random
// key when there is none. Replicas starting together agree: the one whose create loses reads
// the winner's key.
func EnsureKey(ctx context.Context, c client.Client, ref types.NamespacedName) ([]byte, error) {
	for attempt := 0; attempt < 2; attempt++ {
		var s corev1.Secret
		err := c.Get(ctx, ref, &s)
		if err == nil {
			return keyOf(&s)
		}
		if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("reading the access key Secret %s: %w", ref, err)
		}
		key := make([]byte, KeyBytes)
		if _, err := rand.Read(key); err != nil {
			return nil, fmt.Errorf("generating the access key: %w", err)
		}
		s = corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ref.Namespace, Name: ref.Name,
				Labels: map[string]string{"app.kubernetes.io/name": "cloudspace-operator"}},
			Type: corev1.SecretTypeOpaque,
			Data: map[string][]byte{keyField: key},
		}
		err = c.Create(ctx, &s)
		if err == nil {
			return key, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("creating the access key Secret %s: %w", ref, err)
		}
	}
	return nil, fmt.Errorf("the access key Secret %s appeared and vanished again", ref)
}

func keyOf(s *corev1.Secret) ([]byte, error) {
	key := s.Data[keyField]
	if len(key) < KeyBytes {
		return nil, fmt.Errorf("the access key Secret %s/%s: data.%s must hold at least %d bytes, has %d",
			s.Namespace, s.Name, keyField, KeyBytes, len(key))
	}
	return key, nil
}
