// Package grpcapi serves the workspace gRPC APIs: the legacy CloudIdeService (the tutorial's API),
// wire-compatible, and cloudspace.v1.WorkspaceService. Both map onto Workspace resources; every
// call is authenticated (TLS, bearer tokens) and a user sees and touches only their own
// workspaces.
package grpcapi

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/cloudspace-dev/cloudspace-operator/internal/access"
	"github.com/cloudspace-dev/cloudspace-operator/internal/activity"
	"github.com/cloudspace-dev/cloudspace-operator/internal/workspace"
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
	maxStorage    int64 // bytes; 0: no budget
	limits        workspace.Limits
	accessKey     []byte
	activity      *activity.Record // nil: calls are not recorded as use
	stopTimeout   time.Duration
	conn          connLimits
	user          userLimitsConfig
	certReload    time.Duration
}

// connLimits bound what anyone who can reach the port holds, before any token is checked.
type connLimits struct {
	maxConns         int
	handshakeTimeout time.Duration
	idleTimeout      time.Duration
	maxAge           time.Duration
	maxAgeGrace      time.Duration // 0: the max wait plus a minute (ageGrace)
	maxStreams       int
	maxHeaderBytes   int
}

// userLimitsConfig bound what one authenticated user holds and how fast they write.
type userLimitsConfig struct {
	maxInFlight       int
	mutationsPerMin   int
	mutationBurst     int
	idleStateEviction time.Duration
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
		// Anyone who reaches the port holds, before any token is checked, about 42 KiB per
		// open connection (8,000 took 333 MiB) and 5.5 KiB more per call that never sends its
		// request: 512 connections of 32 such calls each hold at most about 110 MiB, within
		// the 256 MiB limit. A client past 32 calls on a connection queues, it does not fail;
		// a portal that needs more opens more connections. A handshake has 10 s; a connection
		// idle for 5 min is dropped (clients reconnect on their next call); every connection
		// is recycled after 30 min, which also ends calls stalled on it, with a grace of the
		// max wait plus a minute so that no create-and-wait is cut short. 16 KiB of headers
		// holds gRPC's own and a bearer token many times over.
		conn: connLimits{maxConns: 512, handshakeTimeout: 10 * time.Second, idleTimeout: 5 * time.Minute,
			maxAge: 30 * time.Minute, maxStreams: 32, maxHeaderBytes: 16 << 10},
		// A user's calls: 16 at once (4 Watch streams, a wait on each of 5 workspaces, reads);
		// 30 writes a minute in bursts of 10 (start or stop every workspace at once, twice).
		// The state of a user idle for 5 minutes is dropped.
		user:       userLimitsConfig{maxInFlight: 16, mutationsPerMin: 30, mutationBurst: 10, idleStateEviction: 5 * time.Minute},
		certReload: 10 * time.Second,
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

// WithMaxStorage sets each user's storage budget: the bytes of the volumes of their workspaces
// and of those they keep after delete, together (default 0: no budget, only the counts).
func WithMaxStorage(q resource.Quantity) Option {
	return func(c *config) error {
		if q.Sign() < 0 {
			return fmt.Errorf("storage budget %s must not be negative", q.String())
		}
		c.maxStorage = q.Value()
		return nil
	}
}

// WithWorkspaceLimits sets the most one workspace may ask for (default
// workspace.DefaultLimits); the operator's Workspace lifecycle enforces the same.
func WithWorkspaceLimits(l workspace.Limits) Option {
	return func(c *config) error { c.limits = l; return nil }
}

// WithActivity records each call on a workspace as a use of it, which postpones its idle stop
// (the Workspace lifecycle's idle policy reads the same record).
func WithActivity(a *activity.Record) Option {
	return func(c *config) error { c.activity = a; return nil }
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

// Limits of every connection: requests are small, and a client that pings too often is cut
// off rather than served. The configurable ones are in connLimits.
const (
	maxRecvMsgSize   = 64 << 10
	keepaliveMinTime = 20 * time.Second
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
	limits *userLimits
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
	if err := validateLimits(cfg); err != nil {
		return nil, err
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
	tokens := &tokenStore{reader: mgr.GetAPIReader(), secret: cfg.tokens, ttl: cfg.tokenTTL, maxStale: cfg.tokenMaxStale,
		now: time.Now, log: mgr.GetLogger().WithName("grpc-tokens")}
	// The cache, not the manager's client: that reads unstructured objects around it.
	w := newWorkspaces(mgr.GetClient(), mgr.GetCache(), mgr.GetAPIReader(), n, cfg,
		newQuotaLock(mgr.GetClient(), mgr.GetAPIReader(), cfg.tokens.Namespace))
	return newServer(cfg, tokens, w), nil
}

func newServer(cfg *config, tokens *tokenStore, w *workspaces) *Server {
	return &Server{cfg: cfg, tokens: tokens, w: w, limits: newUserLimits(cfg.user, time.Now)}
}

// NeedLeaderElection is false: every replica serves the API.
func (s *Server) NeedLeaderElection() bool { return false }

// Start serves until ctx ends, then stops gracefully: running calls get stopTimeout to finish.
func (s *Server) Start(ctx context.Context) error {
	lis, err := net.Listen("tcp", s.cfg.address)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", s.cfg.address, err)
	}
	return s.serve(ctx, lis)
}

// serve serves on lis until ctx ends.
func (s *Server) serve(ctx context.Context, lis net.Listener) error {
	log := ctrl.Log.WithName("grpc")
	srv, err := s.grpcServer(ctx)
	if err != nil {
		_ = lis.Close()
		return err
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(newLimitListener(lis, s.cfg.conn.maxConns, log)) }()
	log.Info("serving the workspace API", "address", lis.Addr().String(), "maxConnections", s.cfg.conn.maxConns,
		"maxCallsInFlightPerUser", s.cfg.user.maxInFlight, "writesPerMinutePerUser", s.cfg.user.mutationsPerMin)
	select {
	case err := <-errc:
		return fmt.Errorf("serving gRPC: %w", err)
	case <-ctx.Done():
	}
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

// grpcServer is the server with its services and limits; its certificate is watched until ctx ends.
func (s *Server) grpcServer(ctx context.Context) (*grpc.Server, error) {
	certs, err := newCertSource(s.cfg.certFile, s.cfg.keyFile, s.cfg.certReload, ctrl.Log.WithName("grpc-tls"))
	if err != nil {
		return nil, err
	}
	go certs.run(ctx)
	creds := credentials.NewTLS(&tls.Config{GetCertificate: certs.GetCertificate, MinVersion: tls.VersionTLS12})
	opts := append(s.connOptions(), grpc.Creds(creds),
		grpc.ChainUnaryInterceptor(s.tokens.unary, s.limits.unary), grpc.ChainStreamInterceptor(s.tokens.stream, s.limits.stream))
	srv := grpc.NewServer(opts...)
	pb.RegisterCloudIdeServiceServer(srv, &legacyService{w: s.w})
	workspacev1.RegisterWorkspaceServiceServer(srv, &v1Service{w: s.w})
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	reflection.Register(srv)
	go func() { <-ctx.Done(); hs.Shutdown() }()
	return srv, nil
}

// connOptions bound what a connection holds before its calls are authenticated: they cost
// memory to anyone who can reach the port (connOptions' numbers are in defaultConfig).
func (s *Server) connOptions() []grpc.ServerOption {
	c := s.cfg.conn
	return []grpc.ServerOption{
		grpc.MaxRecvMsgSize(maxRecvMsgSize),
		grpc.MaxConcurrentStreams(uint32(c.maxStreams)),
		// Advertised to clients, and enforced while the header block is decoded: an
		// over-size block is discarded as it is read, never held whole.
		grpc.MaxHeaderListSize(uint32(c.maxHeaderBytes)),
		grpc.ConnectionTimeout(c.handshakeTimeout),
		// Idle connections hold their 32 KiB write buffer only while writing.
		grpc.SharedWriteBuffer(true),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: keepaliveMinTime, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			MaxConnectionIdle: c.idleTimeout, MaxConnectionAge: c.maxAge, MaxConnectionAgeGrace: s.cfg.ageGrace(),
			Time: 2 * time.Minute, Timeout: 20 * time.Second,
		}),
	}
}
