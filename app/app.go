// Package app assembles the operator's manager from its parts: the cache it keeps and the
// kinds it serves on it. main.go and the integration suite both build their managers with it,
// so that the suite runs what the binary runs rather than a copy of it. It sits above
// internal/ and controllers/, which it wires together: nothing under internal/ imports
// controllers/.
package app

import (
	"fmt"
	"slices"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/cloudspace-dev/cloudspace-operator/controllers"
	"github.com/cloudspace-dev/cloudspace-operator/internal/engine"
	"github.com/cloudspace-dev/cloudspace-operator/internal/namespaces"
	"github.com/cloudspace-dev/cloudspace-operator/internal/watches"
)

// CacheOptions are the manager's cache options: only watchNamespaces when any (WATCH_NAMESPACE),
// every namespace when none. The cache drops managed fields, which nothing reads and which are
// much of a resource's bytes, and its objects share the strings they repeat (engine.SharedStrings).
func CacheOptions(watchNamespaces []string) cache.Options {
	return cache.Options{
		DefaultTransform:  engine.SharedStrings(cache.TransformStripManagedFields()),
		DefaultNamespaces: namespaces.CacheConfigs(watchNamespaces),
	}
}

// Scope is what of its kinds a manager serves.
type Scope struct {
	// Namespaces are the only ones served when any (WATCH_NAMESPACE); the manager's cache must
	// hold them (CacheOptions).
	Namespaces []string
	// Webhooks serves the admission webhooks on the manager's webhook server.
	Webhooks bool
}

// Setup serves the kinds of ws on mgr, the shipped ones with their Go lifecycles configured by
// kinds, within scope; opts are more engine options (the operands' environment, say).
func Setup(mgr ctrl.Manager, ws []watches.Watch, kinds controllers.Config, scope Scope, opts ...engine.Option) error {
	// Clipped: appending must not write into the caller's array.
	opts = append(slices.Clip(opts), engine.WithNamespaces(scope.Namespaces))
	if err := controllers.Setup(mgr, ws, kinds, opts...); err != nil {
		return fmt.Errorf("setting up controllers: %w", err)
	}
	if !scope.Webhooks {
		return nil
	}
	if err := controllers.SetupVirtualMachineWebhook(mgr, kinds.VM); err != nil {
		return fmt.Errorf("setting up webhooks: %w", err)
	}
	return nil
}
