package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"helm.sh/helm/v3/pkg/chartutil"
	"k8s.io/client-go/discovery"
)

// capabilities serves .Capabilities from discovery, fetched at most once per ttl, so that charts
// can branch on the cluster's version and APIs without a discovery call per render.
type capabilities struct {
	client discovery.DiscoveryInterface
	ttl    time.Duration
	now    func() time.Time

	mu      sync.Mutex
	caps    *chartutil.Capabilities
	key     string
	fetched time.Time
}

func newCapabilities(client discovery.DiscoveryInterface, ttl time.Duration) *capabilities {
	return &capabilities{client: client, ttl: ttl, now: time.Now}
}

// Get returns the capabilities and a key that changes whenever they do.
func (c *capabilities) Get() (*chartutil.Capabilities, string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.caps != nil && c.now().Sub(c.fetched) < c.ttl {
		return c.caps, c.key, nil
	}
	caps, err := c.fetch()
	if err != nil {
		if c.caps != nil {
			// A stale answer is better than failing every render while discovery is flaky.
			return c.caps, c.key, nil
		}
		return nil, "", err
	}
	c.caps, c.key, c.fetched = caps, capabilitiesKey(caps), c.now()
	return c.caps, c.key, nil
}

func (c *capabilities) fetch() (*chartutil.Capabilities, error) {
	sv, err := c.client.ServerVersion()
	if err != nil {
		return nil, fmt.Errorf("discovering the server version: %w", err)
	}
	kv, err := chartutil.ParseKubeVersion(sv.GitVersion)
	if err != nil {
		return nil, fmt.Errorf("parsing server version %q: %w", sv.GitVersion, err)
	}
	_, lists, err := c.client.ServerGroupsAndResources()
	if err != nil && len(lists) == 0 {
		return nil, fmt.Errorf("discovering the server's APIs: %w", err)
	}
	var versions chartutil.VersionSet
	for _, l := range lists {
		versions = append(versions, l.GroupVersion)
		for _, r := range l.APIResources {
			versions = append(versions, l.GroupVersion+"/"+r.Kind)
		}
	}
	slices.Sort(versions)
	versions = slices.Compact(versions)
	caps := chartutil.DefaultCapabilities.Copy()
	caps.KubeVersion = *kv
	caps.APIVersions = versions
	return caps, nil
}

func capabilitiesKey(c *chartutil.Capabilities) string {
	sum := sha256.Sum256([]byte(c.KubeVersion.Version + "\n" + strings.Join(c.APIVersions, "\n")))
	return hex.EncodeToString(sum[:8])
}
