package images

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/cloudspace-dev/cloudspace-operator/test/infra/bundle"
	"github.com/cloudspace-dev/cloudspace-operator/test/infra/oci"
)

// UpgradeVersion is the operator version the bundle is also built as, replacing the
// repository's, so that an upgrade can be installed and tested (the OLM suites' 0.2.0).
const UpgradeVersion = "0.2.0"

// Repositories of the product's images, under the registry.
const (
	OperatorRepo        = "cloudspace-operator"
	BundleRepo          = "cloudspace-operator-bundle"
	CatalogRepo         = "cloudspace-operator-catalog"
	ScorecardTestsRepo  = "cloudspace-scorecard-tests"
	LauncherRepo        = "cloudspace/vm-launcher"
	IDERepo             = "cloudspace/workspace-ide"
	DiskRepo            = "cloudspace/vm-disk"
	TestDaemonRepo      = "cloudspace/test-daemon"
	PauseRepo           = "pause"
	CoreDNSRepo         = "coredns"
	BusyboxRepo         = "busybox"
	OPMRepo             = "opm"
	OLMUtilRepo         = "olm-util"
	StockScorecardRepo  = "scorecard-test"
	PrometheusRepo      = "prometheus"
	launcherTag         = "0.1.0"
	ideTag              = "4.96.4"
	diskTag             = "debian-12"
	stockScorecardTag   = "v1.34.1"
	operatorUser        = "65532:65532"
	catalogConfigsLabel = "operators.operatorframework.io.index.configs.v1"
)

// All is every recipe, in build order: an image comes after those it names.
func All(version string) []Recipe {
	v := "v" + version
	up := "v" + UpgradeVersion
	return []Recipe{
		// operator-sdk run bundle-upgrade takes no --decompression-image: its registry pod runs
		// the upstream busybox reference it has built in, which the node pulls from the registry
		// as that registry's mirror, under this path.
		pause(), coreDNS(), busybox(BusyboxRepo, "1.35"), busybox("library/busybox", "1.36.0"), opm(), olmUtil(), stockScorecard(), prometheus(),
		operator(version), operator(UpgradeVersion), scorecardTests(v),
		// The launcher's rootfs.sh runs its tests inside the root filesystem; the IDE's test.sh
		// runs code-server from the built one as its pod does.
		rootfsImage(LauncherRepo, launcherTag, "images/vm-launcher", "", oci.Config{
			Entrypoint: []string{"/usr/local/bin/vm-launcher"}, User: "107:107", Env: []string{debianPath},
		}),
		rootfsImage(IDERepo, ideTag, "images/workspace-ide", "test.sh", oci.Config{
			Entrypoint: []string{"/usr/bin/dumb-init", "--", "/usr/bin/code-server"}, User: "1000:1000",
			WorkingDir: "/home/coder", Env: []string{debianPath, "HOME=/home/coder"}, ExposedPorts: []string{"8080/tcp"},
			Labels: map[string]string{
				"org.opencontainers.image.title":       "cloudspace-workspace-ide",
				"org.opencontainers.image.version":     ideTag,
				"org.opencontainers.image.description": "code-server from the npm registry on Debian trixie: the default Workspace IDE",
			},
		}),
		disk(), testDaemon(v),
		bundleImage(version, ""), bundleImage(UpgradeVersion, bundle.CSVName(version)),
		catalog(up, version, UpgradeVersion),
	}
}

const debianPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// operator is the manager with the charts and watches.yaml it serves and the licences of what
// it links (Dockerfile); each version's image differs by its version label, so that an upgrade
// replaces the pod.
func operator(version string) Recipe {
	return Recipe{
		Repo: OperatorRepo, Tag: "v" + version, Set: Product, Arches: multiArch,
		Dockerfile: "Dockerfile", DockerfileArgs: map[string]string{"VERSION": version},
		Config: oci.Config{
			Entrypoint: []string{"/manager"}, User: operatorUser, WorkingDir: "/opt/cloudspace",
			Labels: map[string]string{
				"org.opencontainers.image.title":   "cloudspace-operator",
				"org.opencontainers.image.version": version,
				"name":                             "cloudspace-operator",
				"vendor":                           "Cloudspace",
				"maintainer":                       "Cloudspace",
				"version":                          version,
				"release":                          "1",
				"summary":                          "Cloudspace Operator: self-service developer infrastructure",
				"description":                      "Browser IDE workspaces with a gRPC API, virtual machines and node daemons, each from a Helm chart the operator applies and owns.",
			},
		},
		Layers: func(b *Builder) ([]v1.Layer, error) {
			manager, err := b.goBinary(".", "manager")
			if err != nil {
				return nil, err
			}
			charts, err := oci.Tree("/opt/cloudspace/helm-charts", filepath.Join(b.Repo, "helm-charts"))
			if err != nil {
				return nil, err
			}
			licenses, err := b.licenses(".", "manager")
			if err != nil {
				return nil, err
			}
			licenseTree, err := oci.Tree("/licenses", licenses)
			if err != nil {
				return nil, err
			}
			return layer(append(append(charts, licenseTree...),
				oci.File("/manager", manager, 0o755),
				oci.File("/opt/cloudspace/watches.yaml", filepath.Join(b.Repo, "watches.yaml"), 0o644))...)
		},
	}
}

// scorecardTests are the operator's own scorecard tests (images/scorecard-tests/Dockerfile).
func scorecardTests(tag string) Recipe {
	return Recipe{
		Repo: ScorecardTestsRepo, Tag: tag, Set: Product, Dockerfile: "images/scorecard-tests/Dockerfile", Arches: multiArch,
		Config: oci.Config{
			Entrypoint: []string{"/usr/local/bin/scorecard-tests"}, User: operatorUser, Env: []string{"PATH=/usr/local/bin"},
		},
		Layers: func(b *Builder) ([]v1.Layer, error) {
			bin, err := b.goBinary("./cmd/scorecard-tests", "scorecard-tests")
			if err != nil {
				return nil, err
			}
			return layer(oci.File("/usr/local/bin/scorecard-tests", bin, 0o755))
		},
	}
}

// testDaemon is a small daemon a GenericDaemon can run in tests: it logs a line every few
// seconds (images/test-daemon).
func testDaemon(tag string) Recipe {
	return Recipe{
		Repo: TestDaemonRepo, Tag: tag, Set: Product, Dockerfile: "images/test-daemon/Dockerfile", Arches: multiArch,
		Config: oci.Config{Entrypoint: []string{"/test-daemon"}, User: operatorUser},
		Layers: func(b *Builder) ([]v1.Layer, error) {
			bin, err := b.goBinary("./images/test-daemon", "test-daemon")
			if err != nil {
				return nil, err
			}
			return layer(oci.File("/test-daemon", bin, 0o755))
		},
	}
}

// rootfsImage is an image whose one layer is the root filesystem dir/rootfs.sh builds from
// Debian's packages for each architecture; dir/check (when named) must pass on it before it is
// kept.
func rootfsImage(repo, tag, dir, check string, cfg oci.Config) Recipe {
	return Recipe{
		Repo: repo, Tag: tag, Set: Product, Dockerfile: dir + "/Dockerfile", Config: cfg, Arches: multiArch,
		Layers: func(b *Builder) ([]v1.Layer, error) {
			// amd64's file keeps the name it had before there were others.
			file := "rootfs.tar"
			if b.arch() != oci.Amd64 {
				file = "rootfs-" + b.arch() + ".tar"
			}
			tar, err := b.cached(dir, file, b.script(dir, "rootfs.sh", b.arch()), b.script(dir, check, b.arch()))
			if err != nil {
				return nil, err
			}
			l, err := oci.LayerFromTar(tar)
			return []v1.Layer{l}, err
		},
	}
}

// disk is the default VM disk, a Debian cloud-init guest, as a container disk: /disk/disk.qcow2
// owned by the qemu user (107), as KubeVirt's containerDisk convention has it. The guest is
// x86-64 on every platform, one layer for all: the launcher runs it on an arm64 node too, under
// software emulation (KubeVirt, whose QEMU is the node's own architecture's, cannot).
func disk() Recipe {
	return Recipe{
		Repo: DiskRepo, Tag: diskTag, Set: Product, Dockerfile: "images/vm-disk/Dockerfile", Arches: multiArch,
		Layers: func(b *Builder) ([]v1.Layer, error) {
			// build.sh writes the disk into a directory of its own; test.sh boots it with the
			// launcher (software emulation), logs in over SSH with a cloud-init key and powers
			// it off.
			build := func(out string) *exec.Cmd {
				return exec.Command("sh", "-c", `d=$(mktemp -d) && sh "$1" "$d" && mv "$d/disk.qcow2" "$2" && rm -rf "$d"`,
					"sh", filepath.Join(b.Repo, "images/vm-disk/build.sh"), out)
			}
			qcow2, err := b.cached("images/vm-disk", "disk.qcow2", build, b.script("images/vm-disk", "test.sh", runtime.GOARCH))
			if err != nil {
				return nil, err
			}
			return layer(oci.Dir("/disk", 0o555, 107, 107), oci.Entry{Path: "/disk/disk.qcow2", Source: qcow2, Mode: 0o644, UID: 107, GID: 107})
		},
	}
}

// script is the command that runs dir/name on a file for arch (Debian's names are Go's for
// the architectures built), nil when name is empty. ARCH tells the script; for an
// architecture other than the host's it runs under hack/emulate.sh, which runs that
// architecture's programs.
func (b *Builder) script(dir, name, arch string) func(file string) *exec.Cmd {
	if name == "" {
		return nil
	}
	return func(file string) *exec.Cmd {
		cmd := exec.Command(filepath.Join(b.Repo, "hack", "emulate.sh"), arch, "sh", filepath.Join(b.Repo, dir, name), file)
		cmd.Env = append(os.Environ(), "ARCH="+arch)
		return cmd
	}
}
