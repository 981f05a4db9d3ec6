package grpcapi

import (
	"flag"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/cloudspace-dev/cloudspace-operator/internal/namespaces"
)

// Off is the address that keeps the API off: the operator serves it only when asked (the
// shipped Deployment asks), since without a token Secret it would only refuse.
const Off = "0"

// Options are the workspace API's settings as the operator's flags give them. NewOptions
// fills them from defaultConfig, so the API's defaults are written once, there, for the With*
// options and the flags alike; ServerOptions turns them into those With* options.
type Options struct {
	// Address is where the API listens; Off (or empty) keeps it off.
	Address           string
	CertFile, KeyFile string
	// TokenSecret is namespace/name of the Secret of user tokens.
	TokenSecret string
	// Namespaces is a comma list of the namespaces workspaces are created in, the first the default.
	Namespaces string
	// MaxStorage is each user's storage budget, a quantity ("0": none).
	MaxStorage                                      string
	TokenMaxStaleness, MaxWait, TLSReloadInterval   time.Duration
	MaxWorkspaces, MaxRunning, MaxWatches           int
	MaxRetainedVolumes, MaxCallsInFlight            int
	WritesPerMinute, WriteBurst                     int
	MaxConnections, MaxStreamsPerConnection         int
	MaxHeaderBytes                                  int
	HandshakeTimeout, IdleTimeout, MaxConnectionAge time.Duration
	// MaxConnectionAgeGrace of 0 is the max wait plus a minute (WithMaxConnectionAge).
	MaxConnectionAgeGrace time.Duration
}

// NewOptions are the API's defaults, but for Address, which is Off.
func NewOptions() Options {
	c := defaultConfig()
	return Options{
		Address: Off, CertFile: c.certFile, KeyFile: c.keyFile,
		TokenSecret: c.tokens.String(), Namespaces: strings.Join(c.namespaces, ","),
		MaxStorage:        resource.NewQuantity(c.maxStorage, resource.BinarySI).String(),
		TokenMaxStaleness: c.tokenMaxStale, MaxWait: c.maxWait, TLSReloadInterval: c.certReload,
		MaxWorkspaces: c.maxWorkspaces, MaxRunning: c.maxRunning, MaxWatches: c.maxWatches,
		MaxRetainedVolumes: c.maxRetained, MaxCallsInFlight: c.user.maxInFlight,
		WritesPerMinute: c.user.mutationsPerMin, WriteBurst: c.user.mutationBurst,
		MaxConnections: c.conn.maxConns, MaxStreamsPerConnection: c.conn.maxStreams,
		MaxHeaderBytes: c.conn.maxHeaderBytes, HandshakeTimeout: c.conn.handshakeTimeout,
		IdleTimeout: c.conn.idleTimeout, MaxConnectionAge: c.conn.maxAge, MaxConnectionAgeGrace: c.conn.maxAgeGrace,
	}
}

// Enabled reports whether an address was given.
func (o *Options) Enabled() bool {
	return o.Address != Off && o.Address != ""
}

// BindFlags registers the API's flags (--grpc-*, --quota-*, --workspace-namespaces) on fs,
// bound to o: each flag's default is the value of the field it sets.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	for _, f := range o.stringFlags() {
		fs.StringVar(f.value, f.name, *f.value, f.usage)
	}
	for _, f := range o.intFlags() {
		fs.IntVar(f.value, f.name, *f.value, f.usage)
	}
	for _, f := range o.durationFlags() {
		fs.DurationVar(f.value, f.name, *f.value, f.usage)
	}
}

// boundFlag is a flag of type T: its name, help, and the field it sets.
type boundFlag[T any] struct {
	value       *T
	name, usage string
}

func (o *Options) stringFlags() []boundFlag[string] {
	return []boundFlag[string]{
		{&o.Address, "grpc-bind-address", "Address of the workspace gRPC API, e.g. :9443; 0 disables it."},
		{&o.CertFile, "grpc-tls-cert-file", "TLS certificate of the gRPC API; a self-signed one when empty."},
		{&o.KeyFile, "grpc-tls-key-file", "TLS key of the gRPC API."},
		{&o.TokenSecret, "grpc-token-secret", "namespace/name of the Secret of API tokens: each key a user, each value that user's bearer token."},
		{&o.Namespaces, "workspace-namespaces", "Comma list of namespaces the API creates workspaces in; the first is the default."},
		{&o.MaxStorage, "quota-max-storage",
			"Bytes of volumes each API user may hold, their workspaces' and those kept after delete together (a quantity: 100Gi); 0 is no budget."},
	}
}

// intFlags are the quotas of each user, and the limits of a connection, which hold before any
// token is read.
func (o *Options) intFlags() []boundFlag[int] {
	return []boundFlag[int]{
		{&o.MaxWorkspaces, "quota-max-workspaces", "Workspaces each API user may have."},
		{&o.MaxRunning, "quota-max-running", "Running workspaces each API user may have."},
		{&o.MaxWatches, "quota-max-watches", "Watch streams each API user may have open at once."},
		{&o.MaxRetainedVolumes, "quota-max-retained-volumes",
			"Volumes each API user may keep after delete (released ones and those of workspaces with reclaimPolicy Retain)."},
		{&o.MaxCallsInFlight, "quota-max-calls-in-flight",
			"Calls each API user may have open at once, Watch streams included; must exceed --quota-max-watches."},
		{&o.WritesPerMinute, "quota-writes-per-minute", "Writes (create, start, stop, delete, rotate access) each API user may make a minute."},
		{&o.WriteBurst, "quota-write-burst", "Writes each API user may make at once before --quota-writes-per-minute applies."},
		{&o.MaxConnections, "grpc-max-connections", "Open connections the gRPC API accepts; one more is closed at once."},
		{&o.MaxStreamsPerConnection, "grpc-max-streams-per-connection", "Calls open at once on one gRPC connection; more wait for a place."},
		{&o.MaxHeaderBytes, "grpc-max-header-bytes", "Largest metadata of a gRPC call, in bytes (4096 to 65536)."},
	}
}

func (o *Options) durationFlags() []boundFlag[time.Duration] {
	return []boundFlag[time.Duration]{
		{&o.TokenMaxStaleness, "grpc-token-max-staleness",
			"How long the last tokens read are served while the token Secret cannot be read; then calls are Unavailable."},
		{&o.MaxWait, "grpc-max-wait", "Longest a create-and-wait call waits, whatever its deadline."},
		{&o.TLSReloadInterval, "grpc-tls-reload-interval", "How often the gRPC certificate files are read again, and looked for while missing."},
		{&o.HandshakeTimeout, "grpc-handshake-timeout", "Longest a new gRPC connection may take over its TLS handshake and HTTP/2 preface."},
		{&o.IdleTimeout, "grpc-idle-timeout", "A gRPC connection with no call open for this long is closed."},
		{&o.MaxConnectionAge, "grpc-max-connection-age", "Clients are asked to reconnect after this long, so that replicas share the load."},
		{&o.MaxConnectionAgeGrace, "grpc-max-connection-age-grace",
			"How long calls may go on past --grpc-max-connection-age; 0 is --grpc-max-wait plus a minute."},
	}
}

// ServerOptions are o as options of New; New checks them. The workspace limits and the access
// key are the Workspace kind's settings, not the API's: the caller adds them.
func (o *Options) ServerOptions() []Option {
	return []Option{
		WithAddress(o.Address), WithTLSFiles(o.CertFile, o.KeyFile), withTokenSecretRef(o.TokenSecret),
		WithNamespaces(namespaces.Split(o.Namespaces)...), WithTokenMaxStaleness(o.TokenMaxStaleness),
		WithMaxWait(o.MaxWait), WithTLSReloadInterval(o.TLSReloadInterval),
		WithQuota(o.MaxWorkspaces, o.MaxRunning), WithMaxWatches(o.MaxWatches), WithMaxRetainedVolumes(o.MaxRetainedVolumes),
		withMaxStorageText(o.MaxStorage),
		WithMaxCallsInFlight(o.MaxCallsInFlight), WithMutationRate(o.WritesPerMinute, o.WriteBurst),
		WithMaxConnections(o.MaxConnections), WithHandshakeTimeout(o.HandshakeTimeout), WithIdleTimeout(o.IdleTimeout),
		WithMaxConnectionAge(o.MaxConnectionAge, o.MaxConnectionAgeGrace),
		WithMaxStreamsPerConnection(o.MaxStreamsPerConnection), WithMaxHeaderBytes(o.MaxHeaderBytes),
	}
}

// withMaxStorageText is WithMaxStorage for the flag's quantity.
func withMaxStorageText(text string) Option {
	q, err := resource.ParseQuantity(text)
	if err != nil {
		return func(*config) error {
			return fmt.Errorf("--quota-max-storage %q is not a quantity of bytes: %w", text, err)
		}
	}
	return WithMaxStorage(q)
}

// withTokenSecretRef is WithTokenSecret for the flag's namespace/name.
func withTokenSecretRef(ref string) Option {
	ns, name, ok := strings.Cut(ref, "/")
	if !ok {
		return func(*config) error { return fmt.Errorf("--grpc-token-secret %q must be namespace/name", ref) }
	}
	return WithTokenSecret(ns, name)
}
