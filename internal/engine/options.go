package engine

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The engine's timings. They are fixed: nothing has needed another value, and each is
// documented where it acts.
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
	recordKey        []byte
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

// WithNamespaces limits the child cache to these namespaces (default: all), matching the
// manager's WATCH_NAMESPACE.
func WithNamespaces(ns []string) Option {
	return func(c *config) error {
		c.namespaces = ns
		return nil
	}
}
