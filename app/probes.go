package app

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
)

// AddProbes adds /healthz, which answers while the process runs, and /readyz, which answers
// once the informers have synced: a replica is not sent traffic before it can serve it.
func AddProbes(mgr ctrl.Manager) error {
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return fmt.Errorf("adding health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("informers", cacheSynced(mgr.GetCache())); err != nil {
		return fmt.Errorf("adding ready check: %w", err)
	}
	return nil
}

// cacheSynced is a readiness check: the operator is ready once its informers have synced.
func cacheSynced(c cache.Cache) healthz.Checker {
	return func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), time.Second)
		defer cancel()
		if !c.WaitForCacheSync(ctx) {
			return errors.New("informer caches have not synced")
		}
		return nil
	}
}
