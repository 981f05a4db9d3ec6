package integration

import (
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// TestWorkspaceGitURLMustBeHTTPS: the clone (helm-charts/workspace) runs with no SSH key and
// no known_hosts, so an ssh:// or git@ clone always failed ("Host key verification failed"),
// the init container crash-looped and the workspace timed out. The CRD refuses such URLs at
// create, naming spec.git.url and saying why; an https:// URL is accepted.
func TestWorkspaceGitURLMustBeHTTPS(t *testing.T) {
	ns := newNamespace(t)
	for i, tc := range []struct {
		url   string
		valid bool
	}{
		{"https://github.example/a/b.git", true},
		{"git@github.example:a/b.git", false},
		{"ssh://git@github.example/a/b.git", false},
		{"http://github.example/a/b.git", false},
	} {
		err := createWorkspaceCase(t, ns, i, tc.url, "git", "url")
		switch {
		case tc.valid && err != nil:
			t.Errorf("%s: refused (%v), want accepted", tc.url, err)
		case !tc.valid && (!apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.git.url") ||
			!strings.Contains(err.Error(), "ssh:// and git@ URLs are not supported")):
			t.Errorf("%s: %v, want Invalid naming spec.git.url and saying ssh:// and git@ URLs are not supported", tc.url, err)
		}
	}
}
