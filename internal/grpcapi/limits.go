package grpcapi

import (
	"context"
	"net"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/cloudspace-dev/cloudspace-operator/pkg/pb"
	"github.com/cloudspace-dev/cloudspace-operator/pkg/workspacev1"
)

// The limits that refuse connections and calls, as the refusals metric names them.
const (
	limitConnections   = "connections"
	limitCallsInFlight = "calls-in-flight"
	limitWrites        = "writes"
)

// The API's saturation: open connections against their cap, by listener ("api", "legacy"),
// and refusals by limit; never by user, so the series stay few. The CloudspaceAPISaturated
// alert reads them (config/prometheus).
var (
	apiConnections = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "cloudspace_api_connections",
		Help: "Connections the workspace API holds open, by listener (api, legacy).",
	}, []string{"listener"})
	apiConnectionsMax = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "cloudspace_api_connections_max",
		Help: "The cap of open connections (--grpc-max-connections), by listener.",
	}, []string{"listener"})
	apiRefusals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cloudspace_api_refusals_total",
		Help: "Connections and calls the workspace API refused at a limit: connections (the cap), calls-in-flight and writes (a user's).",
	}, []string{"limit"})
)

func init() {
	metrics.Registry.MustRegister(apiConnections, apiConnectionsMax, apiRefusals)
	// Every series from zero, so that Prometheus sees the first refusal as an increase.
	for _, l := range []string{limitConnections, limitCallsInFlight, limitWrites} {
		apiRefusals.WithLabelValues(l)
	}
}

// limitListener closes a connection over the cap as soon as it is accepted. Waiting instead
// (netutil.LimitListener) would leave the extra connections in the kernel's queue, where
// the clients' handshakes time out anyway, and hide the refusal from them.
type limitListener struct {
	net.Listener
	slots chan struct{}
	open  prometheus.Gauge // the connections held, in the metrics
	log   logr.Logger
	warn  rate.Sometimes
}

// newLimitListener caps l at maxConns open connections; name is its listener label in the
// metrics.
func newLimitListener(l net.Listener, maxConns int, name string, log logr.Logger) *limitListener {
	apiConnectionsMax.WithLabelValues(name).Set(float64(maxConns))
	return &limitListener{Listener: l, slots: make(chan struct{}, maxConns), open: apiConnections.WithLabelValues(name),
		log: log, warn: rate.Sometimes{Interval: time.Minute}}
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.slots <- struct{}{}:
			l.open.Inc()
			return &limitedConn{Conn: c, release: func() { <-l.slots; l.open.Dec() }}, nil
		default:
		}
		_ = c.Close()
		apiRefusals.WithLabelValues(limitConnections).Inc()
		l.warn.Do(func() {
			l.log.Info("refusing connections: the cap of open connections is reached", "maxConnections", cap(l.slots))
		})
	}
}

// limitedConn gives its slot back once, however many times it is closed.
type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// mutating are the calls that write: they are rate-limited per user.
var mutating = map[string]bool{
	workspacev1.WorkspaceService_Create_FullMethodName:             true,
	workspacev1.WorkspaceService_Start_FullMethodName:              true,
	workspacev1.WorkspaceService_Stop_FullMethodName:               true,
	workspacev1.WorkspaceService_Delete_FullMethodName:             true,
	workspacev1.WorkspaceService_RotateAccess_FullMethodName:       true,
	pb.CloudIdeService_CreateSpaceAndWaitForRunning_FullMethodName: true,
	pb.CloudIdeService_DeleteSpace_FullMethodName:                  true,
}

// userLimits bounds each authenticated user's calls in flight and the rate of their writes.
// Only authenticated users have state, so it is bounded by the token Secret; the state of a
// user idle long enough for their bucket to be full again is dropped, which loses nothing.
type userLimits struct {
	cfg        QuotaConfig
	every      rate.Limit
	evictAfter time.Duration
	now        func() time.Time

	mu    sync.Mutex
	users map[string]*userState
	swept time.Time
}

type userState struct {
	inFlight int
	bucket   *rate.Limiter
	last     time.Time // when a call last started or ended
}

// userStateEviction is how long a user is idle before their state is dropped (if their bucket
// is full again by then).
const userStateEviction = 5 * time.Minute

// newUserLimits applies cfg's limits of calls: in flight, and writes.
func newUserLimits(cfg QuotaConfig, now func() time.Time) *userLimits {
	every := rate.Limit(float64(cfg.WritesPerMinute) / 60)
	refill := time.Duration(float64(cfg.WriteBurst) / float64(every) * float64(time.Second))
	return &userLimits{cfg: cfg, every: every, evictAfter: max(userStateEviction, refill), now: now,
		users: map[string]*userState{}}
}

// admit takes one of the user's places in flight and, for a write, a token of their bucket;
// release gives the place back. The refusals say what the limit is, and when to try again.
func (l *userLimits) admit(user, method string) (release func(), err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.sweep(now)
	u := l.users[user]
	if u == nil {
		u = &userState{bucket: rate.NewLimiter(l.every, l.cfg.WriteBurst)}
		l.users[user] = u
	}
	u.last = now
	if u.inFlight >= l.cfg.MaxCallsInFlight {
		apiRefusals.WithLabelValues(limitCallsInFlight).Inc()
		return nil, status.Errorf(codes.ResourceExhausted,
			"user %s has %d calls in flight, the most allowed: retry once one of them has ended", user, u.inFlight)
	}
	if mutating[method] {
		r := u.bucket.ReserveN(now, 1)
		if wait := r.DelayFrom(now); wait > 0 {
			r.CancelAt(now)
			apiRefusals.WithLabelValues(limitWrites).Inc()
			return nil, l.tooFast(user, wait)
		}
	}
	u.inFlight++
	return func() { l.release(user) }, nil
}

func (l *userLimits) release(user string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if u := l.users[user]; u != nil {
		u.inFlight--
		u.last = l.now()
	}
}

// tooFast is ResourceExhausted with the delay in words and as RetryInfo, for clients that read it.
func (l *userLimits) tooFast(user string, wait time.Duration) error {
	wait = wait.Round(100 * time.Millisecond)
	st := status.Newf(codes.ResourceExhausted,
		"user %s may make %d writes a minute, in bursts of %d: retry in %s", user, l.cfg.WritesPerMinute, l.cfg.WriteBurst, wait)
	if detailed, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(wait)}); err == nil {
		st = detailed
	}
	return st.Err()
}

// sweep drops, at most once per evictAfter, the users with no call in flight and none for
// evictAfter: their buckets are full again, so a new state is the same as the old.
func (l *userLimits) sweep(now time.Time) {
	if now.Sub(l.swept) < l.evictAfter {
		return
	}
	l.swept = now
	for user, u := range l.users {
		if u.inFlight == 0 && now.Sub(u.last) >= l.evictAfter {
			delete(l.users, user)
		}
	}
}

// unary runs after authentication; public calls have no user and are not counted here.
func (l *userLimits) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	user := userFrom(ctx)
	if user == "" {
		return handler(ctx, req)
	}
	release, err := l.admit(user, info.FullMethod)
	if err != nil {
		return nil, err
	}
	defer release()
	return handler(ctx, req)
}

func (l *userLimits) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	user := userFrom(ss.Context())
	if user == "" {
		return handler(srv, ss)
	}
	release, err := l.admit(user, info.FullMethod)
	if err != nil {
		return err
	}
	defer release()
	return handler(srv, ss)
}
