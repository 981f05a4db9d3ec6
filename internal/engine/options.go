package engine

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Defaults of the options below.
const (
	// DefaultFieldManager is the server-side apply field manager of every child.
	DefaultFieldManager = "cloudspace-operator"
	// DefaultStatusInterval is how often a progress-only status change may be written.
	DefaultStatusInterval = 5 * time.Second
	// DefaultPollInterval is how often a resource whose children are not ready is looked at.
	DefaultPollInterval = 10 * time.Second
	// DefaultFirstStatusDelay is how long the first status of a generation may wait for its
	// children to become ready, so that children ready within it cost one status write.
	DefaultFirstStatusDelay = 5 * time.Second
	// DefaultMaxRetryDelay caps the back-off of a resource whose reconcile keeps failing.
	DefaultMaxRetryDelay = 10 * time.Second
)

// config holds what Setup's options set.
type config struct {
	lifecycles       map[schema.GroupVersionKind]Lifecycle
	fieldManager     string
	capabilitiesTTL  time.Duration
	namespaces       []string
	pollInterval     time.Duration
	deleteInterval   time.Duration
	reconcileTimeout time.Duration
	statusInterval   time.Duration
	firstStatusDelay time.Duration
	maxRetryDelay    time.Duration
	operandEnv       []corev1.EnvVar
}

func defaultConfig() config {
	return config{
		lifecycles:       map[schema.GroupVersionKind]Lifecycle{},
		fieldManager:     DefaultFieldManager,
		capabilitiesTTL:  5 * time.Minute,
		pollInterval:     DefaultPollInterval,
		deleteInterval:   2 * time.Second,
		reconcileTimeout: 2 * time.Minute,
		statusInterval:   DefaultStatusInterval,
		firstStatusDelay: DefaultFirstStatusDelay,
		maxRetryDelay:    DefaultMaxRetryDelay,
	}
}

// Option configures Setup; each one says its default.
type Option func(*config) error

// WithLifecycle registers Go lifecycle code for a kind; kinds without one are pure chart kinds.
func WithLifecycle(gvk schema.GroupVersionKind, lc Lifecycle) Option {
	return func(c *config) error {
		if lc == nil {
			return fmt.Errorf("lifecycle for %s is nil", gvk)
		}
		c.lifecycles[gvk] = lc
		return nil
	}
}

// WithFieldManager sets the server-side apply field manager (default DefaultFieldManager).
func WithFieldManager(name string) Option {
	return func(c *config) error {
		if name == "" {
			return fmt.Errorf("field manager must not be empty")
		}
		c.fieldManager = name
		return nil
	}
}

// WithCapabilitiesTTL sets how long discovered capabilities are reused (default 5m).
func WithCapabilitiesTTL(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("capabilities TTL %s must be positive", d)
		}
		c.capabilitiesTTL = d
		return nil
	}
}

// WithNamespaces limits the child cache to these namespaces (default: all), matching the
// manager's WATCH_NAMESPACE.
func WithNamespaces(ns []string) Option {
	return func(c *config) error {
		c.namespaces = ns
		return nil
	}
}

// WithPollInterval sets how often a resource whose children are not ready yet is looked at again
// without an event (default DefaultPollInterval); ready resources are never polled.
func WithPollInterval(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("poll interval %s must be positive", d)
		}
		c.pollInterval = d
		return nil
	}
}

// WithStatusInterval sets how often a status whose only changes are progress (counts and
// condition messages) may be written (default DefaultStatusInterval); other changes are written at once.
func WithStatusInterval(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 {
			return fmt.Errorf("status interval %s must not be negative", d)
		}
		c.statusInterval = d
		return nil
	}
}

// WithFirstStatusDelay sets how long the first status of a resource's generation may be put off
// while its children are on their way to ready (default DefaultFirstStatusDelay; 0 writes it at
// once): children ready within it cost one status write (Ready) instead of two (Applying,
// then Ready). A failure is written at once.
func WithFirstStatusDelay(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 {
			return fmt.Errorf("first status delay %s must not be negative", d)
		}
		c.firstStatusDelay = d
		return nil
	}
}

// WithMaxRetryDelay caps the exponential back-off of a resource whose reconcile keeps failing
// (default DefaultMaxRetryDelay): after an outage, what failed meanwhile is retried within it.
func WithMaxRetryDelay(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("max retry delay %s must be positive", d)
		}
		c.maxRetryDelay = d
		return nil
	}
}
