package grpcapi

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"time"
)

// BindFlags registers the API's flags (--grpc-*, --quota-*, --workspace-namespaces) on fs,
// bound to c: each flag's default is the value of the field it sets.
func (c *Config) BindFlags(fs *flag.FlagSet) {
	for _, f := range c.stringFlags() {
		fs.StringVar(f.value, f.name, *f.value, f.usage)
	}
	for _, f := range c.intFlags() {
		fs.IntVar(f.value, f.name, *f.value, f.usage)
	}
	for _, f := range c.durationFlags() {
		fs.DurationVar(f.value, f.name, *f.value, f.usage)
	}
}

// boundFlag is a flag of type T: its name, its help, the field it sets, and the rule of its
// value (nil: any), which says what is wrong with a value it refuses.
type boundFlag[T any] struct {
	value       *T
	name, usage string
	rule        func(T) error
}

// checkFlags are the errors of the flags whose values break their rules, each naming its flag
// and value.
func checkFlags[T any](flags []boundFlag[T]) []error {
	var errs []error
	for _, f := range flags {
		if f.rule == nil {
			continue
		}
		if err := f.rule(*f.value); err != nil {
			errs = append(errs, fmt.Errorf("--%s %s %w", f.name, shown(*f.value), err))
		}
	}
	return errs
}

// shown is a flag's value in an error: text quoted, so that an empty one shows.
func shown(v any) string {
	if s, ok := v.(string); ok {
		return strconv.Quote(s)
	}
	return fmt.Sprint(v)
}

func (c *Config) stringFlags() []boundFlag[string] {
	return []boundFlag[string]{
		{&c.Address, "grpc-bind-address", "Address of the workspace gRPC API, e.g. :9443; 0 disables it.", nil},
		{&c.TLS.CertFile, "grpc-tls-cert-file", "TLS certificate of the gRPC API; a self-signed one when empty.", nil},
		{&c.TLS.KeyFile, "grpc-tls-key-file", "TLS key of the gRPC API.", nil},
		{&c.Tokens.Secret, "grpc-token-secret",
			"namespace/name of the Secret of API tokens: each key a user, each value that user's bearer token.", parses(parseRef)},
		{&c.Namespaces, "workspace-namespaces",
			"Comma list of namespaces the API creates workspaces in; the first is the default.", parses(parseNamespaces)},
		{&c.Legacy.Address, "grpc-legacy-bind-address",
			"Address of a plaintext listener serving the legacy CloudIdeService alone, without tokens, for the tutorial's web backend; 0 disables it.", nil},
		{&c.Legacy.User, "grpc-legacy-user", "The user every call on the legacy listener acts as (its workspaces, its quotas).", nil},
		{&c.Quota.MaxStorage, "quota-max-storage",
			"Bytes of volumes each API user may hold, their workspaces' and those kept after delete together (a quantity: 100Gi); 0 is no budget.",
			parses(parseBytes)},
	}
}

// minHeaderBytes leaves room for gRPC's own headers and a long bearer token.
const minHeaderBytes = 4 << 10

// intFlags are the quotas of each user, and the limits of a connection, which hold before any
// token is read.
func (c *Config) intFlags() []boundFlag[int] {
	return []boundFlag[int]{
		{&c.Quota.MaxWorkspaces, "quota-max-workspaces", "Workspaces each API user may have.", atLeast(1)},
		{&c.Quota.MaxRunning, "quota-max-running", "Running workspaces each API user may have.", atLeast(1)},
		{&c.Quota.MaxWatches, "quota-max-watches", "Watch streams each API user may have open at once.", atLeast(1)},
		{&c.Quota.MaxRetainedVolumes, "quota-max-retained-volumes",
			"Volumes each API user may keep after delete (released ones and those of workspaces with reclaimPolicy Retain).", atLeast(0)},
		{&c.Quota.MaxCallsInFlight, "quota-max-calls-in-flight",
			"Calls each API user may have open at once, Watch streams included; must exceed --quota-max-watches.", atLeast(1)},
		{&c.Quota.WritesPerMinute, "quota-writes-per-minute",
			"Writes (create, start, stop, delete, rotate access) each API user may make a minute.", atLeast(1)},
		{&c.Quota.WriteBurst, "quota-write-burst", "Writes each API user may make at once before --quota-writes-per-minute applies.", atLeast(1)},
		{&c.Tokens.ReviewsPerSecond, "grpc-reviews-per-second",
			"TokenReviews and SubjectAccessReviews a second the API may ask for, to accept the cluster's own tokens and impersonation; 0 accepts only the token Secret's.",
			atLeast(0)},
		{&c.Conn.MaxConnections, "grpc-max-connections", "Open connections the gRPC API accepts; one more is closed at once.", atLeast(1)},
		{&c.Conn.MaxStreamsPerConnection, "grpc-max-streams-per-connection",
			"Calls open at once on one gRPC connection; more wait for a place.", atLeast(1)},
		{&c.Conn.MaxHeaderBytes, "grpc-max-header-bytes", "Largest metadata of a gRPC call, in bytes (4096 to 65536).",
			between(minHeaderBytes, maxRecvMsgSize)},
	}
}

func (c *Config) durationFlags() []boundFlag[time.Duration] {
	return []boundFlag[time.Duration]{
		{&c.Tokens.MaxStaleness, "grpc-token-max-staleness",
			"How long the last tokens read are served while the token Secret cannot be read; then calls are Unavailable.", outlastsTokenTTL},
		{&c.MaxWait, "grpc-max-wait", "Longest a create-and-wait call waits, whatever its deadline.", positive},
		{&c.TLS.ReloadInterval, "grpc-tls-reload-interval",
			"How often the gRPC certificate files are read again, and looked for while missing.", positive},
		{&c.Conn.HandshakeTimeout, "grpc-handshake-timeout",
			"Longest a new gRPC connection may take over its TLS handshake and HTTP/2 preface.", positive},
		{&c.Conn.IdleTimeout, "grpc-idle-timeout", "A gRPC connection with no call open for this long is closed.", positive},
		{&c.Conn.MaxConnectionAge, "grpc-max-connection-age",
			"Clients are asked to reconnect after this long, so that replicas share the load.", positive},
		{&c.Conn.MaxConnectionAgeGrace, "grpc-max-connection-age-grace",
			"How long calls may go on past --grpc-max-connection-age; 0 is --grpc-max-wait plus a minute.", notNegative},
	}
}

// parses is the rule of a text that parse takes.
func parses[T any](parse func(string) (T, error)) func(string) error {
	return func(text string) error {
		_, err := parse(text)
		return err
	}
}

// atLeast is the rule of a number that is least or more.
func atLeast(least int) func(int) error {
	return func(n int) error {
		if n < least {
			return fmt.Errorf("must be at least %d", least)
		}
		return nil
	}
}

// between is the rule of a number from least to most.
func between(least, most int) func(int) error {
	return func(n int) error {
		if n < least || n > most {
			return fmt.Errorf("must be between %d and %d", least, most)
		}
		return nil
	}
}

func positive(d time.Duration) error {
	if d <= 0 {
		return errors.New("must be positive")
	}
	return nil
}

func notNegative(d time.Duration) error {
	if d < 0 {
		return errors.New("must not be negative")
	}
	return nil
}

// outlastsTokenTTL is the rule of the token staleness: shorter than the time between two
// reads of the Secret, the tokens read would go stale before the next read, and calls be
// refused while the Secret is readable.
func outlastsTokenTTL(d time.Duration) error {
	if d < tokenTTL {
		return fmt.Errorf("is shorter than the %s between reads of the token Secret", tokenTTL)
	}
	return nil
}
