package engine

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
	kubetesting "k8s.io/client-go/testing"
)

func TestCapabilitiesAreCachedForTheTTL(t *testing.T) {
	fake := &fakediscovery.FakeDiscovery{Fake: &kubetesting.Fake{}, FakedServerVersion: &version.Info{GitVersion: "v1.34.4", Major: "1", Minor: "34"}}
	fake.Resources = []*metav1.APIResourceList{{GroupVersion: "apps/v1", APIResources: []metav1.APIResource{{Name: "daemonsets", Kind: "DaemonSet"}}}}
	now := time.Unix(0, 0)
	c := newCapabilities(fake, time.Minute)
	c.now = func() time.Time { return now }

	caps, key, err := c.Get()
	if err != nil {
		t.Fatal(err)
	}
	if caps.KubeVersion.Version != "v1.34.4" || !caps.APIVersions.Has("apps/v1/DaemonSet") || !caps.APIVersions.Has("apps/v1") {
		t.Fatalf("capabilities = %s %v", caps.KubeVersion.Version, caps.APIVersions)
	}
	calls := len(fake.Actions())
	now = now.Add(30 * time.Second)
	if _, again, _ := c.Get(); again != key || len(fake.Actions()) != calls {
		t.Errorf("discovery was called again within the TTL (%d → %d calls)", calls, len(fake.Actions()))
	}
	fake.Resources = append(fake.Resources, &metav1.APIResourceList{GroupVersion: "networking.k8s.io/v1", APIResources: []metav1.APIResource{{Name: "ingresses", Kind: "Ingress"}}})
	now = now.Add(time.Minute)
	caps, changed, _ := c.Get()
	if changed == key || !caps.APIVersions.Has("networking.k8s.io/v1/Ingress") {
		t.Errorf("after the TTL a new API did not show (key %s → %s)", key, changed)
	}
}
