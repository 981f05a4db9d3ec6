package images

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/cloudspace-dev/cloudspace-operator/test/infra/oci"
)

// busyboxApplets are the commands the stand-in images offer through busybox: what OLM's util
// image (cp), operator-sdk's registry pod and its init container (sh, gzip, cat) and
// scorecard's untar and storage containers (tar, sleep) run.
var busyboxApplets = []string{"sh", "cat", "cp", "gzip", "tar", "sleep", "ls", "mkdir", "rm", "mv", "ln", "echo",
	"true", "false", "env", "id", "chmod", "grep", "sed", "head", "tail", "wc", "date", "hostname", "test"}

// busyboxEntries are Debian's static busybox for b's architecture at /bin/busybox with its
// applets linked in /bin.
func busyboxEntries(b *Builder) ([]oci.Entry, error) {
	bin, err := b.busybox()
	if err != nil {
		return nil, err
	}
	entries := []oci.Entry{oci.File("/bin/busybox", bin, 0o755)}
	for _, a := range busyboxApplets {
		entries = append(entries, oci.Symlink("/bin/"+a, "busybox"))
	}
	return entries, nil
}

// busybox is Debian's static busybox for b's architecture: the host's (busybox-static,
// installed) for its own, else the package of that architecture's, unpacked
// (hack/busybox/extract.sh) and cached.
func (b *Builder) busybox() (string, error) {
	if b.arch() == runtime.GOARCH {
		return "/bin/busybox", nil
	}
	return b.cached("hack/busybox", "busybox-"+b.arch(), func(out string) *exec.Cmd {
		return exec.Command("sh", filepath.Join(b.Repo, "hack", "busybox", "extract.sh"), b.arch(), out)
	}, nil)
}

// tmp is a world-writable /tmp, as the images that write there (opm's cache) need.
var tmp = oci.Dir("/tmp", 0o777|fs.ModeSticky, 0, 0)

// pause is the pod sandbox: Kubernetes' own pause.c (from the k8s.io/kubernetes module the
// tools build), compiled static with its Makefile's flags.
func pause() Recipe {
	return Recipe{
		Repo: PauseRepo, Tag: "3.10", Set: Infra,
		Config: oci.Config{Entrypoint: []string{"/pause"}, User: "65535:65535"},
		Layers: func(b *Builder) ([]v1.Layer, error) {
			dir, err := ModuleDir(filepath.Join(b.Repo, "hack", "tools", "kubernetes"), "k8s.io/kubernetes")
			if err != nil {
				return nil, err
			}
			out := filepath.Join(b.Work, "bin", "pause")
			if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
				return nil, err
			}
			cmd := exec.Command("gcc", "-Os", "-Wall", "-Werror", "-static", "-DVERSION=v3.10-cloudspace", "-s",
				"-o", out, filepath.Join(dir, "build", "pause", "linux", "pause.c"))
			if o, err := cmd.CombinedOutput(); err != nil {
				return nil, fmt.Errorf("compiling pause: %w\n%s", err, o)
			}
			return layer(oci.File("/pause", out, 0o755))
		},
	}
}

// coreDNS is the cluster's DNS server (hack/tools/coredns: CoreDNS with the plugins the real
// cluster uses), static, as a non-root user.
func coreDNS() Recipe {
	return Recipe{
		Repo: CoreDNSRepo, Tag: "v1.15.0", Set: Infra,
		Config: oci.Config{Entrypoint: []string{"/coredns"}, User: "65532:65532"},
		Layers: func(b *Builder) ([]v1.Layer, error) {
			bin, err := b.tool("coredns")
			if err != nil {
				return nil, err
			}
			return layer(oci.File("/coredns", bin, 0o755))
		},
	}
}

// busybox stands in for the busybox images operator-sdk's registry pod (--decompression-image)
// and scorecard (--untar-image, --storage-image) run, under repo and tag.
func busybox(repo, tag string) Recipe {
	return Recipe{
		Repo: repo, Tag: tag, Set: Infra, Config: oci.Config{Cmd: []string{"sh"}, Env: []string{"PATH=/bin"}},
		Layers: func(b *Builder) ([]v1.Layer, error) {
			bb, err := busyboxEntries(b)
			if err != nil {
				return nil, err
			}
			return layer(append(bb, tmp)...)
		},
	}
}

// opm stands in for operator-registry's opm image: OLM's catalog operator runs it to unpack
// bundles (--opmImage), operator-sdk's run bundle serves its catalog with it (--index-image),
// and OLM probes registry pods with grpc_health_probe. The catalog image is built on it.
func opm() Recipe {
	return Recipe{
		Repo: OPMRepo, Tag: "v1.55.0", Set: Infra,
		Config: opmConfig(nil),
		Layers: opmLayers,
	}
}

func opmConfig(labels map[string]string) oci.Config {
	all := map[string]string{catalogConfigsLabel: "/configs"}
	for k, v := range labels {
		all[k] = v
	}
	// No --cache-dir: opm then builds its cache at start in a temporary directory. A cache
	// built into the image (what `opm generate dockerfile` does) would be checked at start, but
	// opm's cache files differ from build to build, and the image would not be reproducible.
	return oci.Config{
		Entrypoint: []string{"/bin/opm"}, Cmd: []string{"serve", "/configs"},
		User: "1001", Env: []string{"PATH=/bin"}, Labels: all,
	}
}

func opmLayers(b *Builder) ([]v1.Layer, error) {
	opmBin, err := b.tool("opm")
	if err != nil {
		return nil, err
	}
	probe, err := b.tool("grpc_health_probe")
	if err != nil {
		return nil, err
	}
	bb, err := busyboxEntries(b)
	if err != nil {
		return nil, err
	}
	return layer(append(bb, tmp, oci.Dir("/configs", 0o755, 0, 0),
		// Go's resolver reads it, and opm writes one at start when it is missing.
		oci.Bytes("/etc/nsswitch.conf", []byte("hosts: files dns\n"), 0o644),
		oci.File("/bin/opm", opmBin, 0o755), oci.File("/bin/grpc_health_probe", probe, 0o755))...)
}

// olmUtil stands in for OLM's util image: the bundle unpack job copies /bin/cpb from it with cp.
func olmUtil() Recipe {
	return Recipe{
		Repo: OLMUtilRepo, Tag: "v0.33.0", Set: Infra, Config: oci.Config{User: "1001", Env: []string{"PATH=/bin"}},
		Layers: func(b *Builder) ([]v1.Layer, error) {
			cpb, err := b.tool("cpb")
			if err != nil {
				return nil, err
			}
			bb, err := busyboxEntries(b)
			if err != nil {
				return nil, err
			}
			return layer(append(bb, oci.File("/bin/cpb", cpb, 0o755))...)
		},
	}
}

// stockScorecard stands in for operator-sdk's scorecard-test image, which runs the six stock
// tests the bundle's scorecard configuration names.
func stockScorecard() Recipe {
	return Recipe{
		Repo: StockScorecardRepo, Tag: stockScorecardTag, Set: Infra,
		Config: oci.Config{Entrypoint: []string{"/usr/local/bin/scorecard-test"}, User: operatorUser, Env: []string{"PATH=/usr/local/bin"}},
		Layers: func(b *Builder) ([]v1.Layer, error) {
			bin, err := b.tool("scorecard-test")
			if err != nil {
				return nil, err
			}
			return layer(oci.File("/usr/local/bin/scorecard-test", bin, 0o755))
		},
	}
}

// prometheus is the Prometheus server (hack/tools/prometheus, static) that scrapes the operator
// on the real cluster, as its non-root nobody user, with its web UI (hack/prometheus-ui.sh):
// a Prometheus built without its assets compiled in serves them from web/ui/static under a
// working directory named prometheus, as in its repository. Its data is wherever
// --storage.tsdb.path points (the suite mounts an emptyDir).
func prometheus() Recipe {
	const home = "/usr/share/prometheus"
	return Recipe{
		Repo: PrometheusRepo, Tag: "v0.316.0", Set: Infra,
		Config: oci.Config{Entrypoint: []string{"/bin/prometheus"}, User: "65534:65534", WorkingDir: home, ExposedPorts: []string{"9090/tcp"}},
		Layers: func(b *Builder) ([]v1.Layer, error) {
			bin, err := b.tool("prometheus")
			if err != nil {
				return nil, err
			}
			if out, err := exec.Command(filepath.Join(b.Repo, "hack", "prometheus-ui.sh")).CombinedOutput(); err != nil {
				return nil, fmt.Errorf("hack/prometheus-ui.sh: %w\n%s", err, out)
			}
			ui, err := filepath.EvalSymlinks(filepath.Join(b.Bin, "prometheus-ui"))
			if err != nil {
				return nil, err
			}
			assets, err := oci.Tree(home+"/web/ui/static", filepath.Join(ui, "static"))
			if err != nil {
				return nil, err
			}
			return layer(append(assets, oci.File("/bin/prometheus", bin, 0o755))...)
		},
	}
}

// ModuleDir is the module cache directory of module as the wrapper module at dir requires it.
func ModuleDir(dir, module string) (string, error) {
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", module)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("finding module %s: %w", module, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// hashDir is a short hash of the names and contents of the files under dir that build
// something (documentation and the Dockerfile, which Docker users build from, are left out).
func hashDir(dir string) (string, error) {
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() || strings.HasSuffix(p, ".md") || d.Name() == "Dockerfile" {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fmt.Fprintf(h, "%s %d\n", rel, len(data))
		h.Write(data)
		return nil
	})
	return hex.EncodeToString(h.Sum(nil))[:12], err
}
