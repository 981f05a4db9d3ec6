package grpcapi

import (
	"errors"
	"fmt"
	"time"
)

// WithMaxConnections caps the open connections; one over the cap is closed as soon as it is
// accepted, before its TLS handshake (default 512).
func WithMaxConnections(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("max connections %d must be at least 1", n)
		}
		c.conn.maxConns = n
		return nil
	}
}

// WithHandshakeTimeout bounds a new connection's TLS handshake and HTTP/2 preface (default 10s).
func WithHandshakeTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("handshake timeout %s must be positive", d)
		}
		c.conn.handshakeTimeout = d
		return nil
	}
}

// WithIdleTimeout closes a connection with no call open for this long (default 5m).
func WithIdleTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("idle timeout %s must be positive", d)
		}
		c.conn.idleTimeout = d
		return nil
	}
}

// WithMaxConnectionAge asks clients to reconnect after age, and closes the connection grace
// later whatever its calls. A grace of 0 is the max wait plus a minute, so that a
// create-and-wait is never cut short (default 30m and 0).
func WithMaxConnectionAge(age, grace time.Duration) Option {
	return func(c *config) error {
		if age <= 0 || grace < 0 {
			return fmt.Errorf("connection age %s must be positive and its grace %s not negative", age, grace)
		}
		c.conn.maxAge, c.conn.maxAgeGrace = age, grace
		return nil
	}
}

// WithMaxStreamsPerConnection caps the calls open at once on one connection; a client over it
// waits for one to end (default 32).
func WithMaxStreamsPerConnection(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("max streams per connection %d must be at least 1", n)
		}
		c.conn.maxStreams = n
		return nil
	}
}

// minHeaderBytes leaves room for gRPC's own headers and a long bearer token.
const minHeaderBytes = 4 << 10

// WithMaxHeaderBytes caps a call's metadata, as HTTP/2 counts it (default 16 KiB).
func WithMaxHeaderBytes(n int) Option {
	return func(c *config) error {
		if n < minHeaderBytes || n > maxRecvMsgSize {
			return fmt.Errorf("max header bytes %d must be between %d and %d", n, minHeaderBytes, maxRecvMsgSize)
		}
		c.conn.maxHeaderBytes = n
		return nil
	}
}

// WithMaxCallsInFlight caps the calls each user may have open at once, Watch streams included
// (default 16); it must exceed the max watches.
func WithMaxCallsInFlight(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("max calls in flight %d must be at least 1", n)
		}
		c.user.maxInFlight = n
		return nil
	}
}

// WithMutationRate limits each user's writes (create, start, stop, delete, rotate access) to
// perMinute, in bursts of up to burst (default 30 and 10).
func WithMutationRate(perMinute, burst int) Option {
	return func(c *config) error {
		if perMinute < 1 || burst < 1 {
			return fmt.Errorf("mutation rate %d a minute and burst %d must be at least 1", perMinute, burst)
		}
		c.user.mutationsPerMin, c.user.mutationBurst = perMinute, burst
		return nil
	}
}

// WithTLSReloadInterval sets how often the certificate files are read again (they are also
// read on every change the file system reports), and, while they are missing, looked for
// (default 10s).
func WithTLSReloadInterval(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return errors.New("the TLS reload interval must be positive")
		}
		c.certReload = d
		return nil
	}
}

// validateLimits checks the settings that depend on each other.
func validateLimits(cfg *config) error {
	if cfg.user.maxInFlight <= cfg.maxWatches {
		return fmt.Errorf("max calls in flight %d must exceed max watches %d, or a user watching cannot call", cfg.user.maxInFlight, cfg.maxWatches)
	}
	return nil
}

// ageGrace is the configured grace, or one that outlasts every create-and-wait.
func (c *config) ageGrace() time.Duration {
	if c.conn.maxAgeGrace > 0 {
		return c.conn.maxAgeGrace
	}
	return c.maxWait + time.Minute
}
