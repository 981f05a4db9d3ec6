package app

import (
	"context"
	"net/http/httptest"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// syncingCache is a cache whose informers have synced once synced is set.
type syncingCache struct {
	cache.Cache
	synced bool
}

func (c *syncingCache) WaitForCacheSync(context.Context) bool { return c.synced }

// TestReadyOnceSynced: /readyz fails until the informers have synced.
func TestReadyOnceSynced(t *testing.T) {
	c := &syncingCache{}
	ready := cacheSynced(c)
	req := httptest.NewRequest("GET", "/readyz", nil)
	if err := ready(req); err == nil {
		t.Error("ready before the informers have synced")
	}
	c.synced = true
	if err := ready(req); err != nil {
		t.Errorf("not ready once synced: %v", err)
	}
}
