package grpcapi

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"

	"github.com/cloudspace-dev/cloudspace-operator/internal/pki"
)

// certSource serves the API's certificate through tls.Config.GetCertificate, so that a
// rotated one (cert-manager, OLM) is served on the next handshake without a restart. Until
// the files exist (the Secret is optional in the Deployment, so that an install never waits
// for it) a self-signed certificate is served, and the files are looked for every interval.
type certSource struct {
	certFile, keyFile string
	interval          time.Duration
	log               logr.Logger

	selfSigned *tls.Certificate
	watcher    atomic.Pointer[certwatcher.CertWatcher]
}

// newCertSource reads the files, or makes the self-signed certificate when they are missing
// or none are configured. Files that exist but do not hold a key pair are an error.
func newCertSource(certFile, keyFile string, interval time.Duration, log logr.Logger) (*certSource, error) {
	c := &certSource{certFile: certFile, keyFile: keyFile, interval: interval, log: log}
	if certFile != "" {
		w, err := c.newWatcher()
		if err == nil {
			c.watcher.Store(w)
			return c, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		log.Info("no gRPC certificate yet: serving a self-signed one until it appears", "missing", certFile)
	}
	cert, err := selfSigned()
	if err != nil {
		return nil, fmt.Errorf("making a self-signed gRPC certificate: %w", err)
	}
	c.selfSigned = &cert
	log.Info("serving a self-signed gRPC certificate", "certificateSHA256", fingerprint(cert))
	return c, nil
}

func (c *certSource) newWatcher() (*certwatcher.CertWatcher, error) {
	w, err := certwatcher.New(c.certFile, c.keyFile)
	if err != nil {
		return nil, fmt.Errorf("loading the gRPC TLS certificate %s: %w", c.certFile, err)
	}
	w = w.WithWatchInterval(c.interval)
	w.RegisterCallback(func(cert tls.Certificate) {
		c.log.Info("serving the gRPC certificate", "file", c.certFile, "certificateSHA256", fingerprint(cert))
	})
	return w, nil
}

// GetCertificate is the certificate of the files once read, else the self-signed one.
func (c *certSource) GetCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	if w := c.watcher.Load(); w != nil {
		return w.GetCertificate(hello)
	}
	return c.selfSigned, nil
}

// run watches the files until ctx ends: for changes once they are read, else for them to appear.
func (c *certSource) run(ctx context.Context) {
	if c.certFile == "" {
		return
	}
	w := c.watcher.Load()
	if w == nil {
		if w = c.waitForFiles(ctx); w == nil {
			return
		}
	}
	if err := w.Start(ctx); err != nil {
		// The certificate read last is still served; only its rotation is lost.
		c.log.Error(err, "cannot watch the gRPC certificate: a rotated one will not be served until restart", "file", c.certFile)
	}
}

// waitForFiles looks for the files every interval and serves them once they hold a key pair;
// it is nil if ctx ends first.
func (c *certSource) waitForFiles(ctx context.Context) *certwatcher.CertWatcher {
	tick := time.NewTicker(c.interval)
	defer tick.Stop()
	lastErr := ""
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		w, err := c.newWatcher()
		if err == nil {
			c.watcher.Store(w)
			return w
		}
		// Half-written files are normal for a moment; say so once, not every interval.
		if !errors.Is(err, fs.ErrNotExist) && err.Error() != lastErr {
			c.log.Error(err, "the gRPC certificate files are not usable yet; still serving the self-signed one")
		}
		lastErr = err.Error()
	}
}

func fingerprint(cert tls.Certificate) string {
	sum := sha256.Sum256(cert.Certificate[0])
	return hex.EncodeToString(sum[:])
}

// selfSigned is the certificate served until the configured files exist.
func selfSigned() (tls.Certificate, error) {
	key, err := pki.NewKey()
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("generating the self-signed certificate's key: %w", err)
	}
	der, err := pki.Sign(pki.Request{
		Subject:     pkix.Name{CommonName: "cloudspace-operator"},
		Hosts:       []string{"localhost", "127.0.0.1"},
		NotBefore:   time.Now().Add(-time.Minute),
		NotAfter:    time.Now().Add(365 * 24 * time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, &key.PublicKey, nil, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
