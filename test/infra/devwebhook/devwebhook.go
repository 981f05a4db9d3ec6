// Package devwebhook serves the operator's admission webhooks from a process outside the
// cluster, as `make run` and the end-to-end tests do: a local CA, a serving certificate for
// 127.0.0.1 that it signs, and the webhook configurations of config/webhook pointed at a URL on
// 127.0.0.1 with that CA as their bundle. In a cluster, cert-manager or OLM do this instead.
package devwebhook

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cloudspace-dev/cloudspace-operator/internal/pki"
)

// Files are the CA and the serving certificate in a directory; tls.crt and tls.key are the
// names controller-runtime's webhook server reads (and watches) in its cert dir.
type Files struct {
	CA, CAKey, Cert, Key string
}

// FilesIn names the files in dir.
func FilesIn(dir string) Files {
	return Files{CA: filepath.Join(dir, "ca.crt"), CAKey: filepath.Join(dir, "ca.key"),
		Cert: filepath.Join(dir, "tls.crt"), Key: filepath.Join(dir, "tls.key")}
}

// Issue writes a serving certificate for 127.0.0.1 and localhost into dir, signed by the CA in
// dir, which it makes when there is none: issuing again rotates the certificate, and clients
// that trust the CA keep trusting the server.
func Issue(dir string, validFor time.Duration) (Files, error) {
	return IssueFor(dir, validFor, "127.0.0.1", "localhost")
}

// IssueFor is Issue for a server certificate naming hosts (DNS names and IP addresses).
func IssueFor(dir string, validFor time.Duration, hosts ...string) (Files, error) {
	f := FilesIn(dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return f, err
	}
	ca, caKey, err := loadCA(f)
	if errors.Is(err, os.ErrNotExist) {
		ca, caKey, err = newCA(f, validFor)
	}
	if err != nil {
		return f, fmt.Errorf("the webhook CA in %s: %w", dir, err)
	}
	key, err := pki.NewKey()
	if err != nil {
		return f, err
	}
	notBefore, notAfter := pki.ValidFor(validFor)
	der, err := pki.Sign(pki.Request{Subject: pkix.Name{CommonName: "cloudspace-operator webhooks"}, Hosts: hosts,
		NotBefore: notBefore, NotAfter: notAfter, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}, &key.PublicKey, ca, caKey)
	if err != nil {
		return f, err
	}
	// The key first: a watcher that sees the new certificate must find its key.
	if err := writeKey(f.Key, key); err != nil {
		return f, err
	}
	return f, os.WriteFile(f.Cert, pki.CertPEM(der), 0o600)
}

func newCA(f Files, validFor time.Duration) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := pki.NewKey()
	if err != nil {
		return nil, nil, err
	}
	notBefore, notAfter := pki.ValidFor(validFor)
	der, err := pki.Sign(pki.Request{Subject: pkix.Name{CommonName: "cloudspace-operator local CA"}, CA: true,
		NotBefore: notBefore, NotAfter: notAfter}, &key.PublicKey, nil, key)
	if err != nil {
		return nil, nil, err
	}
	if err := writeKey(f.CAKey, key); err != nil {
		return nil, nil, err
	}
	if err := os.WriteFile(f.CA, pki.CertPEM(der), 0o600); err != nil {
		return nil, nil, err
	}
	ca, err := x509.ParseCertificate(der)
	return ca, key, err
}

func loadCA(f Files) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	certPEM, err := os.ReadFile(f.CA)
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err := os.ReadFile(f.CAKey)
	if err != nil {
		return nil, nil, err
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, nil, errors.New("ca.crt or ca.key is not PEM")
	}
	ca, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, err
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	return ca, key, err
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	data, err := pki.KeyPEM(key)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}

// Configure applies the webhook configurations in manifests (config/webhook/manifests.yaml)
// with every webhook pointed at baseURL plus its path and trusting caPEM.
func Configure(ctx context.Context, c client.Client, manifests, baseURL string, caPEM []byte) error {
	data, err := os.ReadFile(manifests)
	if err != nil {
		return err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return fmt.Errorf("reading %s: %w", manifests, err)
		}
		if len(obj.Object) == 0 {
			continue
		}
		if err := pointAt(obj, baseURL, caPEM); err != nil {
			return err
		}
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner("cloudspace-devwebhook"), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
	}
}

// pointAt replaces each webhook's in-cluster Service with baseURL and sets the CA bundle.
func pointAt(obj *unstructured.Unstructured, baseURL string, caPEM []byte) error {
	hooks, _, err := unstructured.NestedSlice(obj.Object, "webhooks")
	if err != nil {
		return fmt.Errorf("%s %s: %w", obj.GetKind(), obj.GetName(), err)
	}
	for i, h := range hooks {
		hook, _ := h.(map[string]any)
		path, _, _ := unstructured.NestedString(hook, "clientConfig", "service", "path")
		hook["clientConfig"] = map[string]any{"url": baseURL + path, "caBundle": base64.StdEncoding.EncodeToString(caPEM)}
		hooks[i] = hook
	}
	return unstructured.SetNestedSlice(obj.Object, hooks, "webhooks")
}
