package namespaces

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/util/sets"
)

func TestSplit(t *testing.T) {
	cases := map[string][]string{
		"":                 nil,
		"team-a":           {"team-a"},
		" team-a, ,team-b": {"team-a", "team-b"},
	}
	for in, want := range cases {
		if got := Split(in); !slices.Equal(got, want) {
			t.Errorf("Split(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCacheConfigs(t *testing.T) {
	if got := CacheConfigs(nil); got != nil {
		t.Errorf("CacheConfigs(nil) = %v, want nil (every namespace)", got)
	}
	got := CacheConfigs([]string{"dev", "staging"})
	if keys := sets.KeySet(got); !keys.Equal(sets.New("dev", "staging")) {
		t.Errorf("CacheConfigs(dev, staging) has namespaces %v", sets.List(keys))
	}
}
