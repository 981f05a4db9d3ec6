package engine

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AnnotationReleaseSeal seals a released child's record (AnnotationRetainedFor and
// AnnotationReleasedAt) to that very object, under the operator's record key (WithRecordKey):
// anyone who may edit a claim can write the record, only the operator can seal it. What acts on
// a released child without its resource (deletes it when it goes stale) trusts a sealed record
// only.
const AnnotationReleaseSeal = "infra.cloudspace.dev/release-seal"

// WithRecordKey sets the key released children's records are sealed with (default: none, and
// no record is sealed). At least 16 bytes.
func WithRecordKey(key []byte) Option {
	return func(c *config) error {
		if len(key) < 16 {
			return fmt.Errorf("the record key has %d bytes, want at least 16", len(key))
		}
		c.recordKey = key
		return nil
	}
}

// releaseSeal is the seal of obj's release record: its namespace, name and UID, whom it was
// retained for and when it was released.
func releaseSeal(key []byte, obj metav1.Object) string {
	mac := hmac.New(sha256.New, key)
	for _, part := range []string{"cloudspace.dev/release-seal", obj.GetNamespace(), obj.GetName(), string(obj.GetUID()),
		obj.GetAnnotations()[AnnotationRetainedFor], obj.GetAnnotations()[AnnotationReleasedAt]} {
		mac.Write([]byte(part))
		mac.Write([]byte{0})
	}
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// SealedRelease is when obj, a child the engine released, was released, read from its
// record; ok is false unless the record is sealed under key and still names obj: a record
// written by anyone else, or copied from another object, is no release.
func SealedRelease(key []byte, obj metav1.Object) (releasedAt time.Time, ok bool) {
	seal := obj.GetAnnotations()[AnnotationReleaseSeal]
	if len(key) == 0 || seal == "" || !hmac.Equal([]byte(seal), []byte(releaseSeal(key, obj))) {
		return time.Time{}, false
	}
	at, err := time.Parse(time.RFC3339, obj.GetAnnotations()[AnnotationReleasedAt])
	return at, err == nil
}
