package images

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"sigs.k8s.io/yaml"

	"github.com/cloudspace-dev/cloudspace-operator/test/infra/bundle"
	"github.com/cloudspace-dev/cloudspace-operator/test/infra/oci"
)

// bundleImage is the OLM bundle of version (bundle.Dockerfile), replacing the version named in the
// channel. With a registry its CSV and scorecard configuration name every image by digest.
func bundleImage(version, replaces string) Recipe {
	return Recipe{
		Repo: BundleRepo, Tag: "v" + version, Set: Product, Dockerfile: "bundle.Dockerfile", Arches: multiArch,
		Layers: func(b *Builder) ([]v1.Layer, error) {
			dir, err := b.bundleDir(version, replaces)
			if err != nil {
				return nil, err
			}
			var entries []oci.Entry
			for _, sub := range []string{"manifests", "metadata", "tests/scorecard"} {
				tree, err := oci.Tree("/"+sub, filepath.Join(dir, sub))
				if err != nil {
					return nil, err
				}
				entries = append(entries, tree...)
			}
			return layer(entries...)
		},
	}
}

// BundleDir is where a build in work leaves the bundle directory of version (make images:
// bin/images/bundle-VERSION), its images pinned when it pushed them.
func BundleDir(work, version string) string { return filepath.Join(work, "bundle-"+version) }

// bundleDir writes bundle/ as version (with replaces) and, with a registry, its images pinned.
func (b *Builder) bundleDir(version, replaces string) (string, error) {
	dir := BundleDir(b.Work, version)
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(b.Repo, "bundle"))); err != nil {
		return "", err
	}
	edit := bundle.Edit{Version: version, Replaces: replaces}
	if b.Pinned() {
		var err error
		if edit.Images, err = b.pinnedImages(version); err != nil {
			return "", err
		}
	}
	return dir, bundle.Rewrite(dir, edit)
}

// pinnedImages are the bundle's images by digest: the operator of that version, the images its
// RELATED_IMAGE_* variables name, and scorecard's test images.
func (b *Builder) pinnedImages(version string) (bundle.Images, error) {
	names := map[*string]string{}
	var imgs bundle.Images
	names[&imgs.Operator] = OperatorRepo + ":v" + version
	names[&imgs.WorkspaceIDE] = IDERepo + ":" + ideTag
	names[&imgs.VMLauncher] = LauncherRepo + ":" + launcherTag
	names[&imgs.VMContainerDisk] = DiskRepo + ":" + diskTag
	names[&imgs.StockScorecard] = StockScorecardRepo + ":" + stockScorecardTag
	names[&imgs.Scorecard] = ScorecardTestsRepo + ":v" + strings.TrimPrefix(b.repoVersion(), "v")
	for field, name := range names {
		ref, err := b.Ref(name)
		if err != nil {
			return imgs, err
		}
		*field = ref
	}
	return imgs, nil
}

// repoVersion is the repository's operator version (VERSION).
func (b *Builder) repoVersion() string {
	data, _ := os.ReadFile(filepath.Join(b.Repo, "VERSION"))
	return strings.TrimSpace(string(data))
}

// catalog is a file-based catalog (index) image holding the bundles of versions in one
// channel, each replacing the one before (images/catalog/Dockerfile): the opm image with the
// catalog under /configs, as `opm generate dockerfile` shapes it.
func catalog(tag string, versions ...string) Recipe {
	return Recipe{
		Repo: CatalogRepo, Tag: tag, Set: Product, Dockerfile: "images/catalog/Dockerfile", Arches: multiArch,
		Config: opmConfig(nil),
		Layers: func(b *Builder) ([]v1.Layer, error) {
			base, err := opmLayers(b)
			if err != nil {
				return nil, err
			}
			fbc, err := b.catalogFBC(versions)
			if err != nil {
				return nil, err
			}
			configs, err := oci.Layer([]oci.Entry{oci.Bytes("/configs/cloudspace-operator/catalog.yaml", fbc, 0o644)})
			return append(base, configs), err
		},
	}
}

// catalogFBC renders each version's bundle with opm, sets the bundle image it is installed
// from (so OLM unpacks it, as from any catalog), and validates the whole.
func (b *Builder) catalogFBC(versions []string) ([]byte, error) {
	opmBin, err := b.hostTool("opm")
	if err != nil {
		return nil, err
	}
	channels, err := bundle.ReadChannels(filepath.Join(b.Repo, "bundle"))
	if err != nil {
		return nil, err
	}
	var fbc bytes.Buffer
	csvs := make([]string, len(versions))
	for i, v := range versions {
		csvs[i] = bundle.CSVName(v)
	}
	bundle.CatalogPackage(&fbc, channels, csvs...)
	for i, v := range versions {
		replaces := ""
		if i > 0 {
			replaces = OperatorRepo + ".v" + versions[i-1]
		}
		doc, err := b.renderBundle(opmBin, v, replaces)
		if err != nil {
			return nil, err
		}
		fbc.WriteString("---\n")
		fbc.Write(doc)
	}
	dir := filepath.Join(b.Work, "catalog")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "catalog.yaml"), fbc.Bytes(), 0o644); err != nil {
		return nil, err
	}
	if out, err := exec.Command(opmBin, "validate", dir).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("opm validate: %w\n%s", err, out)
	}
	return fbc.Bytes(), nil
}

func (b *Builder) renderBundle(opmBin, version, replaces string) ([]byte, error) {
	dir, err := b.bundleDir(version, replaces)
	if err != nil {
		return nil, err
	}
	out, err := exec.Command(opmBin, "render", dir, "-o", "yaml").Output()
	if err != nil {
		return nil, fmt.Errorf("opm render of bundle %s: %w", version, err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(out, &doc); err != nil {
		return nil, err
	}
	image := b.image(BundleRepo, "v"+version)
	if b.Pinned() {
		if image, err = b.Ref(BundleRepo + ":v" + version); err != nil {
			return nil, err
		}
	}
	doc["image"] = image
	return yaml.Marshal(doc)
}

// bundleConfig is a bundle image's configuration: FROM scratch, labelled with the bundle's
// annotations (metadata/annotations.yaml), from which operator-sdk writes bundle.Dockerfile's.
func bundleConfig(repo string) (oci.Config, error) {
	data, err := os.ReadFile(filepath.Join(repo, "bundle", "metadata", "annotations.yaml"))
	if err != nil {
		return oci.Config{}, err
	}
	var meta struct {
		Annotations map[string]string `json:"annotations"`
	}
	if err := yaml.Unmarshal(data, &meta); err != nil {
		return oci.Config{}, fmt.Errorf("reading the bundle's annotations: %w", err)
	}
	return oci.Config{Labels: meta.Annotations}, nil
}
