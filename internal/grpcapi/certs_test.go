package grpcapi

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// writeCert writes a certificate for cn and its key into dir, each file replaced at once, as
// the kubelet swaps a Secret volume.
func writeCert(t *testing.T, dir, cn string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	replace(t, filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	replace(t, filepath.Join(dir, "tls.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
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

// TestRotatedCertificateIsServed: once the files are rewritten, new handshakes get the new
// certificate, without a restart.
func TestRotatedCertificateIsServed(t *testing.T) {
	dir := t.TempDir()
	writeCert(t, dir, "first")
	a := startTestAPI(t, nil, WithTLSFiles(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")),
		WithTLSReloadInterval(100*time.Millisecond))
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
	a := startTestAPI(t, nil, WithTLSFiles(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")),
		WithTLSReloadInterval(100*time.Millisecond))
	if cn := servedCN(t, a.addr); cn != "cloudspace-operator" {
		t.Fatalf("served %q before the files exist, want the self-signed certificate", cn)
	}
	writeCert(t, dir, "mounted")
	eventually(t, 10*time.Second, "the certificate that appeared is served", func() bool { return servedCN(t, a.addr) == "mounted" })
}
