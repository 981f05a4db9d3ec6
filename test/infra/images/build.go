package images

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/cloudspace-dev/cloudspace-operator/test/infra/oci"
)

// Built is one image built (and pushed), as make images prints and records it.
type Built struct {
	Name string `json:"name"`
	// Ref is the image by digest: in the registry when pushed, else repository@digest.
	Ref     string  `json:"ref"`
	Digest  string  `json:"digest"`
	Size    int64   `json:"size"`
	Seconds float64 `json:"seconds"`
}

// Build builds recipes in order, pushing each through transport when b.Registry is set, and
// records each in b.Refs for the recipes after it.
func (b *Builder) Build(recipes []Recipe, transport http.RoundTripper) ([]Built, error) {
	if b.Refs == nil {
		b.Refs = map[string]string{}
	}
	var out []Built
	for _, r := range recipes {
		start := time.Now()
		built, err := b.build(r, transport)
		if err != nil {
			return out, fmt.Errorf("image %s: %w", r.Name(), err)
		}
		built.Seconds = time.Since(start).Seconds()
		b.Log("%-44s %s %7.1f MiB %5.1fs", built.Name, built.Digest[:19], float64(built.Size)/(1<<20), built.Seconds)
		b.Refs[r.Name()] = built.Ref
		out = append(out, built)
	}
	return out, nil
}

func (b *Builder) build(r Recipe, transport http.RoundTripper) (Built, error) {
	img, size, err := b.assemble(r)
	if err != nil {
		return Built{}, err
	}
	digest, err := img.Digest()
	if err != nil {
		return Built{}, err
	}
	built := Built{Name: r.Name(), Digest: digest.String(), Size: size, Ref: r.Repo + "@" + digest.String()}
	if b.Registry != "" {
		if built.Ref, err = oci.Push(img, b.image(r.Repo, r.Tag), transport); err != nil {
			return Built{}, err
		}
	}
	return built, nil
}

// assemble builds r's image, or its index of one image per architecture, and its size.
func (b *Builder) assemble(r Recipe) (oci.Pushable, int64, error) {
	var imgs []v1.Image
	for _, arch := range r.arches() {
		img, err := b.platformImage(r, arch)
		if err != nil {
			return nil, 0, fmt.Errorf("linux/%s: %w", arch, err)
		}
		imgs = append(imgs, img)
	}
	if len(imgs) == 1 {
		size, err := oci.Size(imgs[0])
		return imgs[0], size, err
	}
	idx, err := oci.Index(imgs...)
	if err != nil {
		return nil, 0, err
	}
	size, err := oci.IndexSize(idx)
	return idx, size, err
}

// platformImage is r's image for linux/arch.
func (b *Builder) platformImage(r Recipe, arch string) (v1.Image, error) {
	b.Arch = arch
	defer func() { b.Arch = "" }()
	layers, err := r.Layers(b)
	if err != nil {
		return nil, err
	}
	for i, l := range layers {
		if layers[i], err = b.layers().Cached(l); err != nil {
			return nil, err
		}
	}
	cfg := r.Config
	if r.Dockerfile == "bundle.Dockerfile" {
		if cfg, err = bundleConfig(b.Repo); err != nil {
			return nil, err
		}
	}
	return oci.ImageFor(arch, cfg, layers...)
}

// PruneLayers removes the compressed layers no build has used for a fortnight: every change of
// the operator leaves one.
func (b *Builder) PruneLayers() error {
	return b.layers().Prune(14 * 24 * time.Hour)
}

// layers keeps the images' compressed layers, beside the slow inputs.
func (b *Builder) layers() oci.LayerCache {
	if b.Cache == "" {
		return oci.LayerCache{}
	}
	return oci.LayerCache{Dir: filepath.Join(b.Cache, "layers")}
}

// WriteJSON records what was built (bin/images.json), for the tests and make real-install.
func WriteJSON(path string, built []Built) error {
	data, err := json.MarshalIndent(built, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// ReadJSON reads what WriteJSON recorded, by image name.
func ReadJSON(path string) (map[string]Built, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var list []Built
	if err := json.Unmarshal(data, &list); err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	out := map[string]Built{}
	for _, b := range list {
		out[b.Name] = b
	}
	return out, nil
}
