// Package grpcapi serves the workspace gRPC APIs: the legacy CloudIdeService (the tutorial's API),
// wire-compatible, and cloudspace.v1.WorkspaceService. Both map onto Workspace resources; every
// call is authenticated (TLS, bearer tokens) and a user sees and touches only their own
// workspaces.
package grpcapi

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/cloudspace-dev/cloudspace-operator/internal/access"
	"github.com/cloudspace-dev/cloudspace-operator/internal/activity"
	"github.com/cloudspace-dev/cloudspace-operator/internal/workspace"
	"github.com/cloudspace-dev/cloudspace-operator/pkg/pb"
	"github.com/cloudspace-dev/cloudspace-operator/pkg/workspacev1"
)

// WorkspaceKind is what the API shares with the Workspace kind's lifecycle, which owns it: the
// lifecycle's settings and state, not the API's, so not in Config.
type WorkspaceKind struct {
	// Limits are the most one workspace may ask for (zero: workspace.DefaultLimits); the
	// lifecycle enforces the same.
	Limits workspace.Limits
	// AccessKey is the operator key the IDE passwords are derived from (internal/access), the
	// same the lifecycle renders them with. Required.
	AccessKey []byte
	// Activity records each call on a workspace as a use of it, which postpones its idle stop
	// (the lifecycle's idle policy reads the same record); nil: calls are not recorded.
	Activity *activity.Record
	// GatewayTrusted: the IDEs ask no password, trusting the web gateway in front of them
	// (--workspace-ide-auth=gateway), and GetAccess hands none out.
	GatewayTrusted bool
}

// Limits of every connection: requests are small, and a client that pings too often is cut
// off rather than served. The configurable ones are in ConnConfig.
const (
	maxRecvMsgSize   = 64 << 10
	keepaliveMinTime = 20 * time.Second
)

// drainTimeout is how long running calls get to finish once the server stops.
const drainTimeout = 10 * time.Second

// The API creates and deletes workspaces for its users, and reads its token Secret.
// +kubebuilder:rbac:groups=infra.cloudspace.dev,resources=workspaces,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",namespace=system,resources=secrets,verbs=get
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=list
// It asks the API server who a token is, and whether its holder may act for a user.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// Server is the gRPC server, run by the manager (it serves on every replica).
type Server struct {
	cfg    *settings
	tokens *tokenStore
	w      *workspaces
	limits *userLimits
	// stopTimeout is drainTimeout; tests shorten it.
	stopTimeout time.Duration
}

// New builds the server with cfg, which it validates, and what it shares with the Workspace
// kind; Add it to the manager to run it.
func New(mgr ctrl.Manager, cfg Config, kind WorkspaceKind) (*Server, error) {
	set, err := newSettings(cfg, kind)
	if err != nil {
		return nil, err
	}
	if len(kind.AccessKey) < access.KeyBytes {
		return nil, fmt.Errorf("the gRPC API needs the access key, of %d bytes at least (has %d), to hand out IDE passwords",
			access.KeyBytes, len(kind.AccessKey))
	}
	n, err := watchWorkspaces(mgr)
	if err != nil {
		return nil, err
	}
	tokens := &tokenStore{reader: mgr.GetAPIReader(), secret: set.tokenSecret, ttl: tokenTTL, maxStaleness: cfg.Tokens.MaxStaleness,
		now: time.Now, log: mgr.GetLogger().WithName("grpc-tokens")}
	if cfg.Tokens.ReviewsPerSecond > 0 {
		tokens.cluster = newClusterAuth(mgr.GetClient(), reviewTTL, cfg.Tokens.ReviewsPerSecond, time.Now)
	}
	// The cache, not the manager's client: that reads unstructured objects around it.
	w := newWorkspaces(mgr.GetClient(), mgr.GetCache(), mgr.GetAPIReader(), n, set,
		newQuotaLock(mgr.GetClient(), mgr.GetAPIReader(), set.tokenSecret.Namespace))
	w.events = mgr.GetEventRecorderFor("cloudspace-workspace-api")
	return newServer(set, tokens, w), nil
}

// watchWorkspaces indexes the cached Workspaces by owner, and notifies of their changes.
func watchWorkspaces(mgr ctrl.Manager) (*notifier, error) {
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
	return n, nil
}

func newServer(cfg *settings, tokens *tokenStore, w *workspaces) *Server {
	return &Server{cfg: cfg, tokens: tokens, w: w, limits: newUserLimits(cfg.Quota, time.Now), stopTimeout: drainTimeout}
}

// NeedLeaderElection is false: every replica serves the API.
func (s *Server) NeedLeaderElection() bool { return false }

// Start serves until ctx ends, then stops gracefully: running calls get stopTimeout to finish.
// With the legacy listener on, it serves that too, and either failing stops both.
func (s *Server) Start(ctx context.Context) error {
	lis, err := net.Listen("tcp", s.cfg.Address)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", s.cfg.Address, err)
	}
	var legacy net.Listener
	if s.cfg.Legacy.Enabled() {
		if legacy, err = net.Listen("tcp", s.cfg.Legacy.Address); err != nil {
			_ = lis.Close()
			return fmt.Errorf("listening on %s for the legacy CloudIdeService: %w", s.cfg.Legacy.Address, err)
		}
	}
	return s.serve(ctx, lis, legacy)
}

// listener is a gRPC server and where it serves.
type listener struct {
	srv  *grpc.Server
	lis  net.Listener
	name string // the metrics' listener label
	what string
}

// serve serves the API on lis and, unless it is nil, the legacy CloudIdeService on legacy,
// until ctx ends or one of them fails.
func (s *Server) serve(ctx context.Context, lis, legacy net.Listener) error {
	log := ctrl.Log.WithName("grpc")
	srv, err := s.grpcServer(ctx)
	if err != nil {
		_ = lis.Close()
		if legacy != nil {
			_ = legacy.Close()
		}
		return err
	}
	all := []listener{{srv, lis, "api", "the workspace API"}}
	if legacy != nil {
		all = append(all, listener{s.legacyServer(), legacy, "legacy", "the legacy CloudIdeService, in plaintext, as user " + s.cfg.Legacy.User})
	}
	errc := make(chan error, len(all))
	for _, l := range all {
		go func() { errc <- l.srv.Serve(newLimitListener(l.lis, s.cfg.Conn.MaxConnections, l.name, log)) }()
		log.Info("serving "+l.what, "address", l.lis.Addr().String(), "maxConnections", s.cfg.Conn.MaxConnections,
			"maxCallsInFlightPerUser", s.cfg.Quota.MaxCallsInFlight, "writesPerMinutePerUser", s.cfg.Quota.WritesPerMinute)
	}
	select {
	case err = <-errc:
		err = fmt.Errorf("serving gRPC: %w", err)
	case <-ctx.Done():
	}
	s.stop(all)
	log.Info("stopped the workspace API")
	return err
}

// stop stops every server gracefully, at once; calls still running after stopTimeout are cut.
func (s *Server) stop(all []listener) {
	stopped := make(chan struct{})
	go func() {
		for _, l := range all {
			l.srv.GracefulStop()
		}
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(s.stopTimeout):
		for _, l := range all {
			l.srv.Stop()
		}
	}
}

// grpcServer is the server with its services and limits; its certificate is watched until ctx ends.
func (s *Server) grpcServer(ctx context.Context) (*grpc.Server, error) {
	certs, err := newCertSource(s.cfg.TLS.CertFile, s.cfg.TLS.KeyFile, s.cfg.TLS.ReloadInterval, ctrl.Log.WithName("grpc-tls"))
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

// legacyServer serves the legacy CloudIdeService alone, in plaintext, every call as the
// configured user: the tutorial's web backend dials without TLS or token. Nothing else is
// served on it: no v1 API, no health, no reflection.
func (s *Server) legacyServer() *grpc.Server {
	user := s.cfg.Legacy.User
	actAs := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		return handler(context.WithValue(ctx, userKey{}, user), req)
	}
	srv := grpc.NewServer(append(s.connOptions(), grpc.ChainUnaryInterceptor(actAs, s.limits.unary))...)
	pb.RegisterCloudIdeServiceServer(srv, &legacyService{w: s.w})
	return srv
}

// connOptions bound what a connection holds before its calls are authenticated: they cost
// memory to anyone who can reach the port (their numbers are in DefaultConfig).
func (s *Server) connOptions() []grpc.ServerOption {
	c := s.cfg.Conn
	return []grpc.ServerOption{
		grpc.MaxRecvMsgSize(maxRecvMsgSize),
		grpc.MaxConcurrentStreams(uint32(c.MaxStreamsPerConnection)),
		// Advertised to clients, and enforced while the header block is decoded: an
		// over-size block is discarded as it is read, never held whole.
		grpc.MaxHeaderListSize(uint32(c.MaxHeaderBytes)),
		grpc.ConnectionTimeout(c.HandshakeTimeout),
		// Idle connections hold their 32 KiB write buffer only while writing.
		grpc.SharedWriteBuffer(true),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: keepaliveMinTime, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			MaxConnectionIdle: c.IdleTimeout, MaxConnectionAge: c.MaxConnectionAge, MaxConnectionAgeGrace: s.cfg.ageGrace(),
			Time: 2 * time.Minute, Timeout: 20 * time.Second,
		}),
	}
}
