// Package images holds the recipe of every image the project builds without Docker (make
// images, make real-cluster): the images the product ships, each described for Docker users by
// a Dockerfile it must agree with, and the stand-ins for the upstream images a disconnected real
// cluster needs (the pod sandbox, OLM's opm and util images, scorecard's).
package images

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/cloudspace-dev/cloudspace-operator/test/infra/oci"
)

// Set is a group of recipes built together.
type Set string

const (
	// Product are the images the product ships (make images).
	Product Set = "product"
	// Infra are the real cluster's stand-ins for upstream images (make real-cluster).
	Infra Set = "infra"
)

// Recipe is how one image is built.
type Recipe struct {
	// Repo is the repository's path under the registry ("cloudspace-operator").
	Repo string
	Tag  string
	Set  Set
	// Dockerfile describes the same image for Docker users (relative to the repository), with
	// DockerfileArgs as its --build-arg values; empty for infra stand-ins.
	Dockerfile     string
	DockerfileArgs map[string]string
	Config         oci.Config
	// Layers builds the image's layers for b.Arch; refs names the images built before it by
	// digest.
	Layers func(b *Builder) ([]v1.Layer, error)
	// Arches are the linux architectures it is built for (GOARCH's names), amd64 when empty;
	// with more than one, the image is an OCI index of one image each, in this order.
	Arches []string
}

// multiArch are the architectures of the product's images: every image the operator, OLM and
// the operator's children run is built for each (the CSV says the operator supports them).
var multiArch = []string{oci.Amd64, "arm64"}

// arches are the architectures r is built for.
func (r Recipe) arches() []string {
	if len(r.Arches) == 0 {
		return []string{oci.Amd64}
	}
	return r.Arches
}

// Name is the recipe's repository and tag.
func (r Recipe) Name() string { return r.Repo + ":" + r.Tag }

// Builder builds images from the repository's sources.
type Builder struct {
	// Repo is the repository's top directory; Bin its bin/ (tool binaries).
	Repo, Bin string
	// Work holds intermediate files (built binaries).
	Work string
	// Cache keeps slow inputs between runs (root filesystems built from Debian's packages),
	// keyed by the hash of the files that build them.
	Cache string
	// Registry is where images are pushed (host:port), empty when they are only built: the
	// bundle then names images as bundle/ does, by tag.
	Registry string
	// Refs are the images built so far, by Name, as registry references by digest (or, with no
	// registry, by name and digest).
	Refs map[string]string
	// Log receives each step.
	Log func(format string, args ...any)
	// Arch is the architecture the recipe's layers are being built for, amd64 when empty.
	Arch string
}

// arch is the architecture being built for.
func (b *Builder) arch() string {
	if b.Arch == "" {
		return oci.Amd64
	}
	return b.Arch
}

// goEnv is the environment of a go command building for b's architecture, as the Dockerfiles'
// builds do (static).
func (b *Builder) goEnv() []string {
	return append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+b.arch())
}

// Ref is the reference by digest of an image built before, by its Name.
func (b *Builder) Ref(name string) (string, error) {
	ref, ok := b.Refs[name]
	if !ok {
		return "", fmt.Errorf("image %s is needed but was not built before", name)
	}
	return ref, nil
}

// Pinned reports whether images are pushed to a registry and named by digest.
func (b *Builder) Pinned() bool { return b.Registry != "" }

// goBinary builds a static binary of the repository's package pkg (as the Dockerfiles do:
// CGO_ENABLED=0, -trimpath, and no VCS stamp, which a Docker build has no .git for).
func (b *Builder) goBinary(pkg, name string) (string, error) {
	out := filepath.Join(b.Work, "bin", "linux-"+b.arch(), name)
	cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-o", out, pkg)
	cmd.Dir = b.Repo
	cmd.Env = b.goEnv()
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", pkg, err, out)
	}
	return out, nil
}

// licenses is a directory of the licences pkg's binary carries, for its image's /licenses
// (hack/licenses.sh, which the Dockerfiles run too), for the platform goBinary builds for.
func (b *Builder) licenses(pkg, name string) (string, error) {
	out := filepath.Join(b.Work, "licenses", "linux-"+b.arch(), name)
	if err := os.RemoveAll(out); err != nil {
		return "", err
	}
	cmd := exec.Command(filepath.Join(b.Repo, "hack", "licenses.sh"), out, pkg)
	cmd.Env = b.goEnv()
	if o, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("hack/licenses.sh %s: %w\n%s", pkg, err, o)
	}
	return out, nil
}

// tool is a binary of bin/ built by hack/tools.sh, which it runs first, for the architecture
// being built for: another than the host's is in bin/linux-ARCH/ (TOOLS_GOARCH).
func (b *Builder) tool(name string) (string, error) {
	return b.toolFor(name, b.arch())
}

// hostTool is a tool of bin/ the build runs.
func (b *Builder) hostTool(name string) (string, error) {
	return b.toolFor(name, runtime.GOARCH)
}

func (b *Builder) toolFor(name, arch string) (string, error) {
	cmd := exec.Command(filepath.Join(b.Repo, "hack", "tools.sh"), name)
	path := filepath.Join(b.Bin, name)
	if arch != runtime.GOARCH {
		cmd.Env = append(os.Environ(), "TOOLS_GOARCH="+arch)
		path = filepath.Join(b.Bin, "linux-"+arch, name)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("hack/tools.sh %s (linux/%s): %w\n%s", name, arch, err, out)
	}
	return filepath.EvalSymlinks(path)
}

// layer is oci.Layer with the error wrapped.
func layer(entries ...oci.Entry) ([]v1.Layer, error) {
	l, err := oci.Layer(entries)
	if err != nil {
		return nil, err
	}
	return []v1.Layer{l}, nil
}

// image names an image in the registry, or by tag alone when nothing is pushed.
func (b *Builder) image(repo, tag string) string {
	if b.Registry == "" {
		return repo + ":" + tag
	}
	return b.Registry + "/" + repo + ":" + tag
}

// Select returns the recipes of the given names (a name or a repository) or, with none, of the
// given sets, in build order.
func Select(all []Recipe, sets []Set, names []string) ([]Recipe, error) {
	var out []Recipe
	for _, r := range all {
		if len(names) > 0 {
			if slices.Contains(names, r.Name()) || slices.Contains(names, r.Repo) {
				out = append(out, r)
			}
		} else if slices.Contains(sets, r.Set) {
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no image matches sets %v or names %v", sets, strings.Join(names, ","))
	}
	return out, nil
}

// WorkDir is where a builder of repo leaves what it builds (bin/images): the bundles among it.
func WorkDir(repo string) string { return filepath.Join(repo, "bin", "images") }

// NewBuilder is a builder of the repository at repo, working in bin/images, caching in
// CLOUDSPACE_IMAGES_CACHE (default ~/.cache/cloudspace-operator/images), logging to log.
func NewBuilder(repo string, log func(format string, args ...any)) (*Builder, error) {
	cache := os.Getenv("CLOUDSPACE_IMAGES_CACHE")
	if cache == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			return nil, err
		}
		cache = filepath.Join(base, "cloudspace-operator", "images")
	}
	return &Builder{Repo: repo, Bin: filepath.Join(repo, "bin"), Work: WorkDir(repo), Cache: cache, Log: log}, nil
}
