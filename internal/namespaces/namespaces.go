// Package namespaces is the operator's namespace scope: the WATCH_NAMESPACE list and the cache
// configuration that keeps a cache to it. It imports nothing of the operator's, so that every
// cache the operator builds (the manager's in app, the engine's child cache) can
// scope itself with the same code.
package namespaces

import (
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// Split parses a comma list of namespaces (WATCH_NAMESPACE, --workspace-namespaces), dropping
// blanks; an empty list is nil, which for WATCH_NAMESPACE means every namespace.
func Split(v string) []string {
	var out []string
	for _, ns := range strings.Split(v, ",") {
		if ns = strings.TrimSpace(ns); ns != "" {
			out = append(out, ns)
		}
	}
	return out
}

// CacheConfigs is a cache's DefaultNamespaces for namespaces: nil (every namespace) when there
// are none, as controller-runtime reads an empty map the same way but nil says so plainly.
func CacheConfigs(namespaces []string) map[string]cache.Config {
	if len(namespaces) == 0 {
		return nil
	}
	out := make(map[string]cache.Config, len(namespaces))
	for _, ns := range namespaces {
		out[ns] = cache.Config{}
	}
	return out
}
