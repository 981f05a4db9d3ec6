package realcluster

import (
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/cloudspace-dev/cloudspace-operator/internal/pki"
)

// certValidity is how long the cluster's certificates last: a development cluster lives hours.
const certValidity = 30 * 24 * time.Hour

// cert is a certificate to issue: a client's (CN and O are its user and groups) or a server's
// (hosts are its DNS names and IP addresses).
type cert struct {
	name   string
	cn     string
	orgs   []string
	hosts  []string
	server bool
}

// certs are every certificate the cluster's components present, by file name under pki/.
func (l Layout) certs() []cert {
	certs := []cert{
		{name: "apiserver", cn: "kube-apiserver", server: true, hosts: []string{NodeIP, APIServiceIP, "127.0.0.1", "localhost",
			"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc." + ClusterDomain}},
		{name: "apiserver-kubelet-client", cn: "kube-apiserver-kubelet-client", orgs: []string{"system:masters"}},
		{name: "admin", cn: "kubernetes-admin", orgs: []string{"system:masters"}},
		{name: "controller-manager", cn: "system:kube-controller-manager"},
		{name: "scheduler", cn: "system:kube-scheduler"},
		{name: "kube-proxy", cn: "system:kube-proxy"},
		{name: "registry", cn: "registry", server: true, hosts: []string{"127.0.0.1", "localhost"}},
		{name: "olm", cn: "olm", server: true, hosts: []string{"127.0.0.1", "localhost"}},
		{name: "packageserver", cn: "packageserver", server: true, hosts: []string{NodeIP,
			"packageserver-service.olm.svc", "packageserver-service.olm.svc." + ClusterDomain}},
	}
	return certs
}

// nodeCerts are a node's kubelet's client certificate (its identity to the Node authorizer)
// and serving certificate.
func nodeCerts(n Node) []cert {
	return []cert{
		{name: "kubelet-client-" + n.Name, cn: "system:node:" + n.Name, orgs: []string{"system:nodes"}},
		{name: "kubelet-" + n.Name, cn: n.Name, server: true, hosts: []string{n.IP(), n.Name}},
	}
}

// issueNodeCerts issues the node's certificates with the cluster's CA (at Up, or when a node
// joins later).
func (l Layout) issueNodeCerts(n Node) error {
	pair, err := tls.LoadX509KeyPair(l.CA(), l.Path("pki", "ca.key"))
	if err != nil {
		return fmt.Errorf("reading the cluster's CA: %w", err)
	}
	ca, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return err
	}
	key, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
	if !ok {
		return errors.New("the cluster's CA key is not an ECDSA key")
	}
	for _, c := range nodeCerts(n) {
		if err := issue(l.Path("pki"), c, ca, key); err != nil {
			return fmt.Errorf("issuing %s: %w", c.name, err)
		}
	}
	return nil
}

// writePKI issues the cluster's CA, the aggregation layer's front-proxy CA and client, the
// service-account signing key and every component's certificate, unless pki/ has them already.
func (l Layout) writePKI() error {
	dir := l.Path("pki")
	if _, err := os.Stat(filepath.Join(dir, "done")); err == nil {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	ca, caKey, err := newCA(dir, "ca", "cloudspace-real-cluster-ca")
	if err != nil {
		return err
	}
	for _, c := range l.certs() {
		if err := issue(dir, c, ca, caKey); err != nil {
			return fmt.Errorf("issuing %s: %w", c.name, err)
		}
	}
	fca, fcaKey, err := newCA(dir, "front-proxy-ca", "cloudspace-front-proxy-ca")
	if err != nil {
		return err
	}
	if err := issue(dir, cert{name: "front-proxy-client", cn: "front-proxy-client"}, fca, fcaKey); err != nil {
		return err
	}
	if err := writeServiceAccountKey(dir); err != nil {
		return err
	}
	if err := l.writeCABundle(); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "done"), nil, 0o600)
}

// writeCABundle writes the system's roots followed by the cluster's CA.
func (l Layout) writeCABundle() error {
	system, err := os.ReadFile("/etc/ssl/certs/ca-certificates.crt")
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	ca, err := os.ReadFile(l.CA())
	if err != nil {
		return err
	}
	return os.WriteFile(l.CABundle(), append(system, ca...), 0o644)
}

func newCA(dir, name, cn string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := pki.NewKey()
	if err != nil {
		return nil, nil, err
	}
	notBefore, notAfter := pki.ValidFor(certValidity)
	der, err := pki.Sign(pki.Request{Subject: pkix.Name{CommonName: cn}, CA: true, NotBefore: notBefore, NotAfter: notAfter},
		&key.PublicKey, nil, key)
	if err != nil {
		return nil, nil, err
	}
	if err := writeKeyPair(dir, name, der, key); err != nil {
		return nil, nil, err
	}
	ca, err := x509.ParseCertificate(der)
	return ca, key, err
}

func issue(dir string, c cert, ca *x509.Certificate, caKey *ecdsa.PrivateKey) error {
	key, err := pki.NewKey()
	if err != nil {
		return err
	}
	usage := []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	if c.server {
		usage = append(usage, x509.ExtKeyUsageServerAuth)
	}
	notBefore, notAfter := pki.ValidFor(certValidity)
	der, err := pki.Sign(pki.Request{Subject: pkix.Name{CommonName: c.cn, Organization: c.orgs}, Hosts: c.hosts,
		NotBefore: notBefore, NotAfter: notAfter, ExtKeyUsage: usage}, &key.PublicKey, ca, caKey)
	if err != nil {
		return err
	}
	return writeKeyPair(dir, c.name, der, key)
}

func writeKeyPair(dir, name string, der []byte, key *ecdsa.PrivateKey) error {
	keyPEM, err := pki.KeyPEM(key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, name+".crt"), pki.CertPEM(der), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, name+".key"), keyPEM, 0o600)
}

// writeServiceAccountKey writes the key the API server signs service-account tokens with
// (sa.key) and the public half it verifies them with (sa.pub).
func writeServiceAccountKey(dir string) error {
	key, err := pki.NewKey()
	if err != nil {
		return err
	}
	priv, err := pki.KeyPEM(key)
	if err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "sa.key"), priv, 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "sa.pub"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644)
}
