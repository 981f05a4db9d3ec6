package grpcapi

import (
	"crypto/tls"
	"crypto/x509/pkix"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cloudspace-dev/cloudspace-operator/internal/pki"
)

// writeCert writes a certificate for cn and its key into dir, each file replaced at once, as
// the kubelet swaps a Secret volume.
func writeCert(t *testing.T, dir, cn string) {
	t.Helper()
	key, err := pki.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	der, err := pki.Sign(pki.Request{Subject: pkix.Name{CommonName: cn}, Hosts: []string{"127.0.0.1"},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour)}, &key.PublicKey, nil, key)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := pki.KeyPEM(key)
	if err != nil {
		t.Fatal(err)
	}
	replace(t, filepath.Join(dir, "tls.key"), keyPEM)
	replace(t, filepath.Join(dir, "tls.crt"), pki.CertPEM(der))
}

func replace(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path+".tmp", data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

// servedCN is the common name of the certificate a new handshake gets.
func servedCN(t *testing.T, addr string) string {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})
	if err != nil {
		t.Logf("handshake: %v", err)
		return ""
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].Subject.CommonName
}

// certFilesIn serves tls.crt and tls.key in dir, read every 100ms.
func certFilesIn(dir string) func(*Config) {
	return func(c *Config) {
		c.TLS = TLSConfig{CertFile: filepath.Join(dir, "tls.crt"), KeyFile: filepath.Join(dir, "tls.key"), ReloadInterval: 100 * time.Millisecond}
	}
}

// TestRotatedCertificateIsServed: once the files are rewritten, new handshakes get the new
// certificate, without a restart.
func TestRotatedCertificateIsServed(t *testing.T) {
	dir := t.TempDir()
	writeCert(t, dir, "first")
	a := startTestAPI(t, nil, certFilesIn(dir))
	if cn := servedCN(t, a.addr); cn != "first" {
		t.Fatalf("served %q, want the certificate of the files", cn)
	}
	writeCert(t, dir, "rotated")
	eventually(t, 10*time.Second, "the rotated certificate is served", func() bool { return servedCN(t, a.addr) == "rotated" })
}

// TestCertificateThatAppearsLaterIsServed: with no files at start the self-signed certificate
// is served, and the files are served once they appear.
func TestCertificateThatAppearsLaterIsServed(t *testing.T) {
	dir := t.TempDir()
	a := startTestAPI(t, nil, certFilesIn(dir))
	if cn := servedCN(t, a.addr); cn != "cloudspace-operator" {
		t.Fatalf("served %q before the files exist, want the self-signed certificate", cn)
	}
	writeCert(t, dir, "mounted")
	eventually(t, 10*time.Second, "the certificate that appeared is served", func() bool { return servedCN(t, a.addr) == "mounted" })
}
