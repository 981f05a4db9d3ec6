// Package pki makes X.509 certificates: the workspace API's self-signed one, each VM launcher's
// pinned one, and the CAs and certificates of the test clusters. One template rule for all:
// a CA may sign certificates, any other certificate signs only its TLS handshakes.
package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"time"
)

// Request is a certificate to sign.
type Request struct {
	Subject pkix.Name
	// Hosts are the DNS names and IP addresses the certificate is for.
	Hosts []string
	// NotBefore and NotAfter bound when it is valid.
	NotBefore, NotAfter time.Time
	// CA makes a certificate authority.
	CA bool
	// ExtKeyUsage says what a leaf is for: x509.ExtKeyUsageServerAuth, ClientAuth.
	ExtKeyUsage []x509.ExtKeyUsage
	// SerialNumber is the certificate's; nil is a random one.
	SerialNumber *big.Int
}

// ValidFor is a Request's validity from an hour ago (clocks differ a little) until d from now.
func ValidFor(d time.Duration) (notBefore, notAfter time.Time) {
	now := time.Now()
	return now.Add(-time.Hour), now.Add(d)
}

// template is r as x509 states it.
func (r Request) template() (*x509.Certificate, error) {
	serial := r.SerialNumber
	if serial == nil {
		var err error
		if serial, err = rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62)); err != nil {
			return nil, fmt.Errorf("choosing a serial number: %w", err)
		}
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: r.Subject, NotBefore: r.NotBefore, NotAfter: r.NotAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: r.ExtKeyUsage,
	}
	if r.CA {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage |= x509.KeyUsageCertSign
	}
	for _, h := range r.Hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	return tmpl, nil
}

// Sign makes r's certificate for the public key pub, signed by issuer with its key; a nil
// issuer makes it self-signed, with signer its own key. It returns the certificate's DER.
func Sign(r Request, pub crypto.PublicKey, issuer *x509.Certificate, signer crypto.Signer) ([]byte, error) {
	tmpl, err := r.template()
	if err != nil {
		return nil, err
	}
	if issuer == nil {
		issuer = tmpl
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, issuer, pub, signer)
	if err != nil {
		return nil, fmt.Errorf("signing the certificate of %s: %w", r.Subject.CommonName, err)
	}
	return der, nil
}

// NewKey is a new ECDSA P-256 key, the kind every certificate here but the VMs' holds.
func NewKey() (*ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating an ECDSA P-256 key: %w", err)
	}
	return key, nil
}

// CertPEM is a certificate's DER as PEM.
func CertPEM(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// KeyPEM is an ECDSA key as PEM (SEC 1, "EC PRIVATE KEY").
func KeyPEM(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encoding the key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}
