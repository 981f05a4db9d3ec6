package access

import (
	"bytes"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/cloudspace-dev/cloudspace-operator/internal/pki"
)

// VMActivity is what a VM's launcher serves its guest's activity with, and what the operator
// reads it with: a bearer token, and a TLS key pair whose certificate the operator pins. Both
// are derived from the operator key and the VM's UID, so that the chart renders them from the
// VM alone (rendering stays a pure function) and the operator needs no Secret of the user's
// namespace to check them. Another VM's launcher, or anyone who learns one VM's credentials,
// holds nothing of another VM's.
type VMActivity struct {
	// Token is the bearer token the launcher accepts.
	Token string
	// PEM is the launcher's private key (PKCS #8) and its self-signed certificate, in that order.
	PEM []byte
	// Public is the certificate's key, which the operator's TLS client pins.
	Public ed25519.PublicKey
}

// certValidity spans every date a launcher will run at: the certificate is pinned by its key,
// not trusted by its dates, and fixed dates keep it the same at every render.
var certValidity = [2]time.Time{time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)}

// VMActivityCredentials derives the activity credentials of the VM with this UID: the same
// inputs always give the same ones (Ed25519 signatures are deterministic).
func VMActivityCredentials(key []byte, uid types.UID) (VMActivity, error) {
	token := derive(key, "cloudspace.dev/vm-activity-token", uid)
	priv := ed25519.NewKeyFromSeed(derive(key, "cloudspace.dev/vm-activity-tls", uid))
	der, err := pki.Sign(pki.Request{
		Subject:      pkix.Name{CommonName: "vm-launcher activity " + string(uid)},
		NotBefore:    certValidity[0],
		NotAfter:     certValidity[1],
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		SerialNumber: big.NewInt(1),
	}, priv.Public(), nil, priv)
	if err != nil {
		return VMActivity{}, fmt.Errorf("creating the activity certificate: %w", err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return VMActivity{}, fmt.Errorf("encoding the activity key: %w", err)
	}
	var out bytes.Buffer
	_ = pem.Encode(&out, &pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8})
	_ = pem.Encode(&out, &pem.Block{Type: "CERTIFICATE", Bytes: der})
	return VMActivity{Token: base64.RawURLEncoding.EncodeToString(token[:24]), PEM: out.Bytes(),
		Public: priv.Public().(ed25519.PublicKey)}, nil
}

// derive is HMAC-SHA256 of uid under key, for one purpose.
func derive(key []byte, purpose string, uid types.UID) []byte {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(purpose))
	mac.Write([]byte{0})
	mac.Write([]byte(uid))
	return mac.Sum(nil)
}

// ClientTLS is the TLS configuration that talks to this launcher only: its certificate is
// self-signed, so it is checked by its key, not by a chain.
func (a VMActivity) ClientTLS() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		// The chain is not verified: VerifyConnection pins the key instead.
		InsecureSkipVerify: true, //nolint:gosec // pinned below
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("the launcher sent no certificate")
			}
			pub, ok := cs.PeerCertificates[0].PublicKey.(ed25519.PublicKey)
			if !ok || !pub.Equal(a.Public) {
				return errors.New("the launcher's certificate is not this VM's")
			}
			return nil
		},
	}
}
