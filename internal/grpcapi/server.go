// Package grpcapi serves the workspace gRPC APIs: the seed's CloudIdeService, wire-compatible,
// and cloudspace.v1.WorkspaceService. Both map onto Workspace resources; every call is
// authenticated (TLS, bearer tokens) and a user sees and touches only their own workspaces.
package grpcapi

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/cloudspace-dev/cloudspace-operator/controllers"
	"github.com/cloudspace-dev/cloudspace-operator/internal/access"
	"github.com/cloudspace-dev/cloudspace-operator/pkg/pb"
	"github.com/cloudspace-dev/cloudspace-operator/pkg/workspacev1"
)

// config is what the options set; defaultConfig documents the defaults.
type config struct {
	address       string
	certFile      string
	keyFile       string
	tokens        types.NamespacedName
	tokenTTL      time.Duration
	tokenMaxStale time.Duration
	namespaces    []string
	maxWait       time.Duration
	maxWorkspaces int
	maxRunning    int
	maxWatches    int
	maxRetained   int
	limits        controllers.WorkspaceLimits
	accessKey     []byte
	stopTimeout   time.Duration
}

func defaultConfig() *config {
	return &config{
		address:       "127.0.0.1:9443",
		tokens:        types.NamespacedName{Namespace: "cloudspace-operator-system", Name: "cloudspace-api-tokens"},
		tokenTTL:      10 * time.Second,
		tokenMaxStale: 5 * time.Minute,
		namespaces:    []string{"cloudspace-workspaces"},
		maxWait:       5 * time.Minute,
		maxWorkspaces: 5,
		maxRunning:    2,
		maxWatches:    4,
		maxRetained:   3,
		stopTimeout:   10 * time.Second,
	}
}

// Option configures the server.
type Option func(*config) error

// WithAddress sets the listen address (default 127.0.0.1:9443).
func WithAddress(addr string) Option {
	return func(c *config) error { c.address = addr; return nil }
}

// WithTLSFiles serves with this certificate and key; without it the server makes a
// self-signed certificate at start (TLS is never off).
func WithTLSFiles(cert, key string) Option {
	return func(c *config) error {
		if (cert == "") != (key == "") {
			return errors.New("the TLS certificate and key must be given together")
		}
		c.certFile, c.keyFile = cert, key
		return nil
	}
}

// WithTokenSecret names the Secret of user tokens: each key a user, each value a token
// (default cloudspace-operator-system/cloudspace-api-tokens).
func WithTokenSecret(ns, name string) Option {
	return func(c *config) error {
		if ns == "" || name == "" {
			return errors.New("the token Secret needs a namespace and a name")
		}
		c.tokens = types.NamespacedName{Namespace: ns, Name: name}
		return nil
	}
}

// WithTokenMaxStaleness sets how long the last tokens read are served while the token Secret
// cannot be read; after that every call is Unavailable (default 5m).
func WithTokenMaxStaleness(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("token staleness %s must be positive", d)
		}
		c.tokenMaxStale = d
		return nil
	}
}

// WithNamespaces sets the namespaces workspaces may be created in; the first is the default
// for calls that name none (default cloudspace-workspaces).
func WithNamespaces(ns ...string) Option {
	return func(c *config) error {
		if len(ns) == 0 {
			return errors.New("at least one workspace namespace is needed")
		}
		c.namespaces = ns
		return nil
	}
}

// WithMaxWait caps how long a create-and-wait may wait, whatever the caller's deadline (default 5m).
func WithMaxWait(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("max wait %s must be positive", d)
		}
		c.maxWait = d
		return nil
	}
}

// WithQuota sets each user's limits: workspaces in all, and running at once (default 5 and 2).
func WithQuota(maxWorkspaces, maxRunning int) Option {
	return func(c *config) error {
		if maxWorkspaces < 1 || maxRunning < 1 {
			return fmt.Errorf("quotas must be at least 1 (got %d workspaces, %d running)", maxWorkspaces, maxRunning)
		}
		c.maxWorkspaces, c.maxRunning = maxWorkspaces, maxRunning
		return nil
	}
}

// WithMaxRetainedVolumes caps the volumes each user keeps or will keep after delete: those
// already released and those of workspaces with reclaimPolicy Retain (default 3).
func WithMaxRetainedVolumes(n int) Option {
	return func(c *config) error {
		if n < 0 {
			return fmt.Errorf("max retained volumes %d must not be negative", n)
		}
		c.maxRetained = n
		return nil
	}
}

// WithWorkspaceLimits sets the most one workspace may ask for (default
// controllers.DefaultWorkspaceLimits); the operator's Workspace lifecycle enforces the same.
func WithWorkspaceLimits(l controllers.WorkspaceLimits) Option {
	return func(c *config) error { c.limits = l; return nil }
}

// WithAccessKey is the operator key the IDE passwords are derived from (internal/access), the
// same the Workspace lifecycle renders them with. Required.
func WithAccessKey(key []byte) Option {
	return func(c *config) error {
		if len(key) < access.KeyBytes {
			return fmt.Errorf("the access key must hold at least %d bytes, has %d", access.KeyBytes, len(key))
		}
		c.accessKey = key
		return nil
	}
}

// WithMaxWatches caps the Watch streams each user may have open at once (default 4).
func WithMaxWatches(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("max watches %d must be at least 1", n)
		}
		c.maxWatches = n
		return nil
	}
}

// Limits of every connection: requests are small, and a client that pings too often or opens
// streams without end is cut off rather than served. A portal multiplexes its users' calls over
// one connection, and a create-and-wait holds its stream until the IDE runs: the stream limit
// leaves room for a burst of those (what a user may have is bounded by the quotas).
const (
	maxRecvMsgSize       = 64 << 10
	maxConcurrentStreams = 1024
	keepaliveMinTime     = 20 * time.Second
)

// The API creates and deletes workspaces for its users, and reads its token Secret.
// +kubebuilder:rbac:groups=infra.cloudspace.dev,resources=workspaces,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",namespace=system,resources=secrets,verbs=get
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=list

// Server is the gRPC server, run by the manager (it serves on every replica).
type Server struct {
	cfg    *config
	tokens *tokenStore
	w      *workspaces
}

// New builds the server; Add it to the manager to run it.
func New(mgr ctrl.Manager, opts ...Option) (*Server, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		if err := o(cfg); err != nil {
			return nil, err
		}
	}
	if cfg.accessKey == nil {
		return nil, errors.New("the gRPC API needs the access key (WithAccessKey) to hand out IDE passwords")
	}
	if cfg.tokenMaxStale < cfg.tokenTTL {
		return nil, fmt.Errorf("token staleness %s is shorter than the %s between reads of the token Secret", cfg.tokenMaxStale, cfg.tokenTTL)
	}
	// Workspaces are read unstructured, decoded one by one (decodingReader).
	cached := &unstructured.Unstructured{}
	cached.SetGroupVersionKind(workspaceGVK)
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), cached, ownerField, ownerIndex); err != nil {
		return nil, fmt.Errorf("indexing workspaces by owner: %w", err)
	}
	n := newNotifier()
	informer, err := mgr.GetCache().GetInformer(context.Background(), cached)
	if err != nil {
		return nil, fmt.Errorf("watching workspaces: %w", err)
	}
	if _, err := informer.AddEventHandler(n.handler()); err != nil {
		return nil, fmt.Errorf("watching workspaces: %w", err)
	}
	return &Server{
		cfg: cfg,
		tokens: &tokenStore{reader: mgr.GetAPIReader(), secret: cfg.tokens, ttl: cfg.tokenTTL, maxStale: cfg.tokenMaxStale,
			now: time.Now, log: mgr.GetLogger().WithName("grpc-tokens")},
		// The cache, not the manager's client: that reads unstructured objects around it.
		w: newWorkspaces(mgr.GetClient(), mgr.GetCache(), mgr.GetAPIReader(), n, cfg,
			newQuotaLock(mgr.GetClient(), mgr.GetAPIReader(), cfg.tokens.Namespace)),
	}, nil
}

// NeedLeaderElection is false: every replica serves the API.
func (s *Server) NeedLeaderElection() bool { return false }

// Start serves until ctx ends, then stops gracefully: running calls get stopTimeout to finish.
func (s *Server) Start(ctx context.Context) error {
	log := ctrl.Log.WithName("grpc")
	creds, fingerprint, err := s.credentials()
	if err != nil {
		return err
	}
	lis, err := net.Listen("tcp", s.cfg.address)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", s.cfg.address, err)
	}
	srv := grpc.NewServer(grpc.Creds(creds),
		grpc.MaxRecvMsgSize(maxRecvMsgSize), grpc.MaxConcurrentStreams(maxConcurrentStreams),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: keepaliveMinTime, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 2 * time.Minute, Timeout: 20 * time.Second}),
		grpc.ChainUnaryInterceptor(s.tokens.unary), grpc.ChainStreamInterceptor(s.tokens.stream))
	pb.RegisterCloudIdeServiceServer(srv, &seedService{w: s.w})
	workspacev1.RegisterWorkspaceServiceServer(srv, &v1Service{w: s.w})
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	reflection.Register(srv)

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(lis) }()
	log.Info("serving the workspace API", "address", lis.Addr().String(), "certificateSHA256", fingerprint)
	select {
	case err := <-errc:
		return fmt.Errorf("serving gRPC: %w", err)
	case <-ctx.Done():
	}
	hs.Shutdown()
	stopped := make(chan struct{})
	go func() { srv.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(s.cfg.stopTimeout):
		srv.Stop()
	}
	log.Info("stopped the workspace API")
	return nil
}

// credentials loads the configured certificate or makes a self-signed one.
func (s *Server) credentials() (credentials.TransportCredentials, string, error) {
	var cert tls.Certificate
	var err error
	if s.cfg.certFile != "" {
		cert, err = tls.LoadX509KeyPair(s.cfg.certFile, s.cfg.keyFile)
	} else {
		cert, err = selfSigned()
	}
	if err != nil {
		return nil, "", fmt.Errorf("loading the gRPC TLS certificate: %w", err)
	}
	sum := sha256.Sum256(cert.Certificate[0])
	return credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}), hex.EncodeToString(sum[:]), nil
}

func selfSigned() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "cloudspace-operator"},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
