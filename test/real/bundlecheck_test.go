package realnode

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cloudspace-dev/cloudspace-operator/test/framework"
	"github.com/cloudspace-dev/cloudspace-operator/test/infra/bundle"
	"github.com/cloudspace-dev/cloudspace-operator/test/infra/images"
)

// TestPushedBundlesPassOperatorHubValidators: each version's bundle as make images pushed it
// (every image by digest in the cluster's registry) passes every validator of
// operator-framework/api v0.45.0, the release OperatorHub's catalogs run, with no error and no
// warning; the multi-architecture checks read each image's platforms from the registry and
// compare them with the CSV's labels and the manager's node affinity.
func TestPushedBundlesPassOperatorHubValidators(t *testing.T) {
	t.Parallel()
	root := framework.RepoRoot()
	server, err := clientset.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{version(), images.UpgradeVersion} {
		dir := images.BundleDir(images.WorkDir(root), v)
		csv, err := bundle.ReadCSV(filepath.Join(dir, "manifests", bundle.CSVFile))
		if err != nil {
			t.Fatal(err)
		}
		// The deprecated-API checks with the oldest Kubernetes the CSV admits and the newest
		// we test with: this cluster's.
		for _, k8s := range []string{csv.Spec.MinKubeVersion, strings.TrimPrefix(server.GitVersion, "v")} {
			cmd := exec.Command(filepath.Join(root, "bin", "bundlecheck"), "-k8s-version", k8s,
				"-index-path", filepath.Join(root, "bundle.Dockerfile"), "-inspect", dir)
			// The registry's certificate is signed by the cluster's CA.
			cmd.Env = append(os.Environ(), "SSL_CERT_FILE="+env["SSL_CERT_FILE"])
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("bundle %s, Kubernetes %s: %v\n%s", v, k8s, err, out)
			}
		}
	}
}
