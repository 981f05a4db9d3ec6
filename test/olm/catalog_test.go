package olm

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/cloudspace-dev/cloudspace-operator/test/framework"
	"github.com/cloudspace-dev/cloudspace-operator/test/infra/bundle"
)

const packageName = bundle.Package

// channels are the repository's bundle's channels.
func channels(t *testing.T) bundle.Channels {
	t.Helper()
	c, err := bundle.ReadChannels(filepath.Join(framework.RepoRoot(), "bundle"))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// csvName is the CSV name of a version of the package.
func csvName(version string) string { return bundle.CSVName(version) }

// bundleVersion writes the repository's bundle as another version of the operator, replacing
// the version before it in the channel (test/infra/bundle, as make images builds 0.2.0).
func bundleVersion(t *testing.T, version, replaces string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "bundle-"+version)
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(framework.RepoRoot(), "bundle"))); err != nil {
		t.Fatal(err)
	}
	if err := bundle.Rewrite(dir, bundle.Edit{Version: version, Replaces: replaces}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// catalogBundle is a bundle directory and its CSV's name; each replaces the one before it.
type catalogBundle struct {
	dir, name string
}

// serveCatalog writes a file-based catalog of the package with bundles in one channel, each
// rendered by `opm render` (its objects inline: no bundle image, no unpack job), and serves it
// with `opm serve` on a free port; it returns the address.
func serveCatalog(t *testing.T, bundles ...catalogBundle) string {
	t.Helper()
	var fbc strings.Builder
	csvs := make([]string, len(bundles))
	for i, b := range bundles {
		csvs[i] = b.name
	}
	bundle.CatalogPackage(&fbc, channels(t), csvs...)
	for _, b := range bundles {
		out, err := exec.Command(filepath.Join(binDir, "opm"), "render", b.dir, "-o", "yaml").Output()
		if err != nil {
			t.Fatalf("opm render %s: %v", b.dir, err)
		}
		fbc.Write(out)
	}
	dir := filepath.Join(t.TempDir(), "catalog")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "catalog.yaml"), []byte(fbc.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(filepath.Join(binDir, "opm"), "validate", dir).CombinedOutput(); err != nil {
		t.Fatalf("opm validate: %v\n%s", err, out)
	}
	port, err := framework.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	opm, err := framework.StartProcess(filepath.Join(binDir, "opm"), filepath.Join(work, "opm.log"), nil,
		"serve", dir, "-p", fmt.Sprint(port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = opm.Stop(10 * time.Second) })
	err = wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		if err, exited := opm.Exited(); exited {
			return false, fmt.Errorf("opm serve exited: %v", err)
		}
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("opm serve did not listen on %s: %v (log: %s)", addr, err, opm.LogPath)
	}
	return addr
}
