package grpcapi

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/cloudspace-dev/cloudspace-operator/internal/namespaces"
)

// Off is the address that keeps the API off: the operator serves it only when asked (the
// shipped Deployment asks), since without a token Secret it would only refuse.
const Off = "0"

// Config is the workspace API's settings, as an admin gives them: each field is one of the
// operator's flags (BindFlags), named after it; DefaultConfig holds the defaults and Validate
// the rules. What the command line gives as text (a Secret's namespace/name, a comma list, a
// quantity) stays text here, as the admin wrote it: New parses it.
type Config struct {
	// Address is where the API listens (--grpc-bind-address); Off (or empty) keeps it off.
	Address string
	// Namespaces is a comma list of the namespaces the API creates workspaces in
	// (--workspace-namespaces); the first is the default for calls that name none.
	Namespaces string
	// MaxWait caps how long a create-and-wait waits, whatever the caller's deadline
	// (--grpc-max-wait).
	MaxWait time.Duration
	// TLS is the API's certificate (--grpc-tls-*): TLS is never off.
	TLS TLSConfig
	// Tokens are the users' bearer tokens (--grpc-token-*).
	Tokens TokenConfig
	// Quota is what each user may hold and how they may call (--quota-*).
	Quota QuotaConfig
	// Conn bounds what anyone who can reach the port holds, before any token is read.
	Conn ConnConfig
	// Legacy is a second listener, plaintext and without tokens, for the tutorial's web
	// backend, which dials so (--grpc-legacy-*). Off unless an address is given.
	Legacy LegacyConfig
}

// LegacyConfig is the listener of the legacy CloudIdeService alone, in plaintext HTTP/2 as the
// tutorial's controller served it. Whoever reaches it acts as User: the admin keeps it off, or
// bound where only the web backend reaches it (the NetworkPolicy of config/legacy-api).
type LegacyConfig struct {
	// Address is where it listens (--grpc-legacy-bind-address); Off (or empty) keeps it off.
	Address string
	// User is who every call on it is (--grpc-legacy-user): its workspaces are that user's,
	// under that user's quotas. Required with an address.
	User string
}

// Enabled reports whether an address was given.
func (c LegacyConfig) Enabled() bool {
	return c.Address != Off && c.Address != ""
}

// TLSConfig is the API's certificate.
type TLSConfig struct {
	// CertFile and KeyFile are the certificate and its key, given together; without them the
	// server serves a self-signed certificate, also while the files are missing.
	CertFile, KeyFile string
	// ReloadInterval is how often the files are read again (they are also read on every
	// change the file system reports) and, while they are missing, looked for.
	ReloadInterval time.Duration
}

// TokenConfig is where the users' tokens are read from, and how long they outlive a failing read.
type TokenConfig struct {
	// Secret is the namespace/name of the Secret of tokens: each key a user, each value that
	// user's token.
	Secret string
	// MaxStaleness is how long the last tokens read are served while the Secret cannot be
	// read; after it every call is Unavailable. It is at least tokenTTL.
	MaxStaleness time.Duration
	// ReviewsPerSecond bounds the TokenReviews and SubjectAccessReviews the API asks the
	// cluster's API server for, to identify tokens the Secret does not know (a ServiceAccount's,
	// the cluster's OIDC users') and to decide impersonation; answers are kept reviewTTL. 0
	// accepts only the Secret's tokens.
	ReviewsPerSecond int
}

// QuotaConfig bounds each authenticated user: what they hold (workspaces, volumes, Watch
// streams), and their calls.
type QuotaConfig struct {
	// MaxWorkspaces and MaxRunning are the workspaces a user may have, and have running.
	MaxWorkspaces, MaxRunning int
	// MaxRetainedVolumes caps the volumes a user keeps or will keep after delete: those
	// already released and those of workspaces with reclaimPolicy Retain.
	MaxRetainedVolumes int
	// MaxStorage is a user's storage budget, a quantity of bytes: their workspaces' volumes
	// and those kept after delete, together. "0" is no budget, only the counts.
	MaxStorage string
	// MaxWatches caps the Watch streams a user may have open at once.
	MaxWatches int
	// MaxCallsInFlight caps the calls a user may have open at once, Watch streams included:
	// it must exceed MaxWatches.
	MaxCallsInFlight int
	// WritesPerMinute and WriteBurst limit a user's writes (create, start, stop, delete,
	// rotate access): so many a minute, in bursts of up to WriteBurst.
	WritesPerMinute, WriteBurst int
}

// ConnConfig bounds every connection, before its calls are authenticated: what it holds costs
// memory to anyone who can reach the port.
type ConnConfig struct {
	// MaxConnections caps the open connections; one over it is closed as soon as it is
	// accepted, before its TLS handshake.
	MaxConnections int
	// MaxStreamsPerConnection caps the calls open at once on one connection; a client over it
	// waits for one to end.
	MaxStreamsPerConnection int
	// MaxHeaderBytes caps a call's metadata, as HTTP/2 counts it.
	MaxHeaderBytes int
	// HandshakeTimeout bounds a new connection's TLS handshake and HTTP/2 preface.
	HandshakeTimeout time.Duration
	// IdleTimeout closes a connection with no call open for this long.
	IdleTimeout time.Duration
	// MaxConnectionAge asks clients to reconnect after this long, and MaxConnectionAgeGrace
	// closes the connection that much later whatever its calls; a grace of 0 is MaxWait plus a
	// minute, so that a create-and-wait is never cut short (ageGrace).
	MaxConnectionAge, MaxConnectionAgeGrace time.Duration
}

// DefaultConfig is the API's settings when the operator's flags set none: the API is off.
func DefaultConfig() Config {
	return Config{
		Address:    Off,
		Namespaces: "cloudspace-workspaces",
		MaxWait:    5 * time.Minute,
		TLS:        TLSConfig{ReloadInterval: 10 * time.Second},
		// 100 reviews a second, in bursts of 200: a portal's first calls for 200 new users at
		// once are decided without a wait; a flood of made-up tokens costs the API server no
		// more than that (reviews are cheap for it: no storage is read).
		Tokens: TokenConfig{Secret: "cloudspace-operator-system/cloudspace-api-tokens", MaxStaleness: 5 * time.Minute,
			ReviewsPerSecond: 100},
		// A user's calls: 16 at once (4 Watch streams, a wait on each of 5 workspaces, reads);
		// 30 writes a minute in bursts of 10 (start or stop every workspace at once, twice).
		Quota: QuotaConfig{MaxWorkspaces: 5, MaxRunning: 2, MaxRetainedVolumes: 3, MaxStorage: "0",
			MaxWatches: 4, MaxCallsInFlight: 16, WritesPerMinute: 30, WriteBurst: 10},
		// Anyone who reaches the port holds, before any token is checked, about 42 KiB per
		// open connection (8,000 took 333 MiB) and 5.5 KiB more per call that never sends its
		// request: 512 connections of 32 such calls each hold at most about 110 MiB, within
		// the 256 MiB limit. A client past 32 calls on a connection queues, it does not fail;
		// a portal that needs more opens more connections. A handshake has 10 s; a connection
		// idle for 5 min is dropped (clients reconnect on their next call); every connection
		// is recycled after 30 min, which also ends calls stalled on it, with a grace of the
		// max wait plus a minute so that no create-and-wait is cut short. 16 KiB of headers
		// holds gRPC's own and a bearer token many times over.
		Conn: ConnConfig{MaxConnections: 512, MaxStreamsPerConnection: 32, MaxHeaderBytes: 16 << 10,
			HandshakeTimeout: 10 * time.Second, IdleTimeout: 5 * time.Minute, MaxConnectionAge: 30 * time.Minute},
		Legacy: LegacyConfig{Address: Off},
	}
}

// Enabled reports whether an address was given.
func (c Config) Enabled() bool {
	return c.Address != Off && c.Address != ""
}

// Validate reports every setting the API cannot run with, each error naming its flag: each
// flag's own rule (flags.go), then those that tie two flags together.
func (c Config) Validate() error {
	errs := slices.Concat(checkFlags(c.stringFlags()), checkFlags(c.intFlags()), checkFlags(c.durationFlags()))
	if (c.TLS.CertFile == "") != (c.TLS.KeyFile == "") {
		errs = append(errs, errors.New("--grpc-tls-cert-file and --grpc-tls-key-file must be given together"))
	}
	if c.Legacy.Enabled() {
		errs = append(errs, c.Legacy.validate(c.Address))
	}
	if c.Quota.MaxCallsInFlight <= c.Quota.MaxWatches {
		errs = append(errs, fmt.Errorf("--quota-max-calls-in-flight %d must exceed --quota-max-watches %d, or a user watching cannot call",
			c.Quota.MaxCallsInFlight, c.Quota.MaxWatches))
	}
	return errors.Join(errs...)
}

// validate checks an enabled legacy listener against the API's own address.
func (c LegacyConfig) validate(apiAddress string) error {
	if c.User == "" {
		return errors.New("--grpc-legacy-user must name the user the legacy listener's calls act as")
	}
	// The user is the owner of every workspace it creates.
	if len(c.User) > validation.LabelValueMaxLength || !ownerPattern.MatchString(c.User) {
		return fmt.Errorf("--grpc-legacy-user %q must be a user name as the token Secret's keys are: lower-case letters, digits, '-', '.' and '_', at most 63", c.User)
	}
	if c.Address == apiAddress {
		return fmt.Errorf("--grpc-legacy-bind-address %q is the API's own address (--grpc-bind-address): it needs a port of its own", c.Address)
	}
	return nil
}

// ageGrace is the configured grace, or one that outlasts every create-and-wait.
func (c Config) ageGrace() time.Duration {
	if c.Conn.MaxConnectionAgeGrace > 0 {
		return c.Conn.MaxConnectionAgeGrace
	}
	return c.MaxWait + time.Minute
}

// settings are what the server runs on: a valid Config with its text parsed, and what the API
// shares with the Workspace kind.
type settings struct {
	Config
	WorkspaceKind
	tokenSecret      types.NamespacedName // Tokens.Secret
	servedNamespaces []string             // Namespaces
	maxStorage       int64                // Quota.MaxStorage in bytes; 0: no budget
}

// newSettings validates cfg and parses its text.
func newSettings(cfg Config, kind WorkspaceKind) (*settings, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	// Validate has parsed each of them: none fails here.
	tokens, _ := parseRef(cfg.Tokens.Secret)
	ns, _ := parseNamespaces(cfg.Namespaces)
	storage, _ := parseBytes(cfg.Quota.MaxStorage)
	return &settings{Config: cfg, WorkspaceKind: kind, tokenSecret: tokens, servedNamespaces: ns, maxStorage: storage}, nil
}

// parseRef parses a Secret's namespace/name.
func parseRef(text string) (types.NamespacedName, error) {
	ns, name, ok := strings.Cut(text, "/")
	if !ok || ns == "" || name == "" {
		return types.NamespacedName{}, errors.New("must be namespace/name")
	}
	return types.NamespacedName{Namespace: ns, Name: name}, nil
}

// parseNamespaces parses a comma list of namespaces, of which there must be one at least.
func parseNamespaces(text string) ([]string, error) {
	ns := namespaces.Split(text)
	if len(ns) == 0 {
		return nil, errors.New("must name a namespace at least")
	}
	return ns, nil
}

// parseBytes parses a quantity of bytes, not negative.
func parseBytes(text string) (int64, error) {
	q, err := resource.ParseQuantity(text)
	if err != nil {
		return 0, fmt.Errorf("is not a quantity of bytes: %w", err)
	}
	if q.Sign() < 0 {
		return 0, errors.New("must not be negative")
	}
	return q.Value(), nil
}
