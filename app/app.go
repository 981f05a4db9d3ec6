// Package app assembles the operator's manager from its parts: the operator's own settings
// and the manager they make (options.go, manager.go), the cache it keeps and the kinds it
// serves on it (app.go), the operator key those kinds derive credentials from (keys.go), the
// workspace API (grpc.go) and the probes (probes.go). main.go and the integration suite both
// build their managers with it, so that the suite runs what the binary runs rather than a copy
// of it. It sits above internal/ and controllers/, which it wires together: nothing under
// internal/ imports controllers/.
package app

import (
	"fmt"
	"os"
	"slices"

	clientfeatures "k8s.io/client-go/features"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/cloudspace-dev/cloudspace-operator/controllers"
	"github.com/cloudspace-dev/cloudspace-operator/internal/engine"
	"github.com/cloudspace-dev/cloudspace-operator/internal/engine/objcache"
	"github.com/cloudspace-dev/cloudspace-operator/internal/namespaces"
	"github.com/cloudspace-dev/cloudspace-operator/internal/watches"
)

// CacheOptions are the manager's cache options: only watchNamespaces when any (WATCH_NAMESPACE),
// every namespace when none. The cache holds its objects compact, without managed fields
// (objcache.Compact).
func CacheOptions(watchNamespaces []string) cache.Options {
	return cache.Options{
		DefaultTransform:  objcache.Compact(nil),
		DefaultNamespaces: namespaces.CacheConfigs(watchNamespaces),
	}
}

// watchListEnv is the environment variable through which client-go's WatchListClient feature
// is set; it wins over StreamInitialLists.
const watchListEnv = "KUBE_FEATURE_" + string(clientfeatures.WatchListClient)

// StreamInitialLists makes the informers stream their initial lists (client-go's WatchListClient)
// unless watchListEnv says otherwise. A list arrives whole before its items are cached, so at
// a restart every kind's list was in memory at once beside the cache filling from it: at 10,000
// resources this was a third of the operator's peak (docs/engine.md, "Memory"). Streamed, each
// object is made compact as it comes. An API server that cannot stream (before 1.32, or with
// the WatchList feature off) is listed from as before: client-go falls back by itself.
func StreamInitialLists() error {
	if _, set := os.LookupEnv(watchListEnv); set {
		return nil
	}
	gates, ok := clientfeatures.FeatureGates().(interface {
		Set(clientfeatures.Feature, bool) error
	})
	if !ok {
		return fmt.Errorf("client-go's feature gates cannot be set: set %s=true to stream lists", watchListEnv)
	}
	if err := gates.Set(clientfeatures.WatchListClient, true); err != nil {
		return fmt.Errorf("streaming initial lists: %w", err)
	}
	return nil
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
	kinds.Namespaces = scope.Namespaces
	if len(kinds.Workspace.AccessKey) > 0 {
		// The operator key seals the records of what the engine keeps after a delete.
		opts = append(opts, engine.WithRecordKey(kinds.Workspace.AccessKey))
	}
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
