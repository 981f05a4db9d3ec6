package pki

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"testing"
	"time"
)

// TestSignedChainVerifies: a leaf a CA signed verifies against that CA for its hosts and its
// use, and the leaf is no CA.
func TestSignedChainVerifies(t *testing.T) {
	caKey, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	notBefore, notAfter := ValidFor(time.Hour)
	caDER, err := Sign(Request{Subject: pkix.Name{CommonName: "test CA"}, CA: true, NotBefore: notBefore, NotAfter: notAfter},
		&caKey.PublicKey, nil, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	leafDER, err := Sign(Request{Subject: pkix.Name{CommonName: "server"}, Hosts: []string{"127.0.0.1", "example.test"},
		NotBefore: notBefore, NotAfter: notAfter, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}},
		&key.PublicKey, ca, caKey)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(leafDER)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	for _, host := range []string{"127.0.0.1", "example.test"} {
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: host, Roots: roots}); err != nil {
			t.Errorf("the leaf does not verify for %s: %v", host, err)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: "other.test", Roots: roots}); err == nil {
		t.Error("the leaf verifies for a host it does not name")
	}
	if leaf.IsCA || leaf.KeyUsage&x509.KeyUsageCertSign != 0 {
		t.Error("a leaf may sign certificates")
	}
}
