package oci

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Config is the part of an image's configuration a Dockerfile states.
type Config struct {
	Entrypoint []string
	Cmd        []string
	// User is "uid:gid" or "uid", numeric.
	User       string
	WorkingDir string
	// Env holds KEY=value entries, in order.
	Env []string
	// ExposedPorts holds "8080/tcp" entries.
	ExposedPorts []string
	Labels       map[string]string
}

// Amd64 is the architecture an image is built for unless another is named.
const Amd64 = "amd64"

// ImageFor assembles layers, in order, into an OCI image for linux on the architecture arch
// (GOARCH's name: amd64, arm64) with config, its history and creation time set to Epoch.
func ImageFor(arch string, cfg Config, layers ...v1.Layer) (v1.Image, error) {
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	for _, l := range layers {
		var err error
		img, err = mutate.Append(img, mutate.Addendum{
			Layer: l,
			// The name of the command before it moved to test/cmd/images: part of every layer's
			// history, so a new one would change every image's digest for nothing.
			History:   v1.History{Created: v1.Time{Time: Epoch}, CreatedBy: "cloudspace-operator hack/images"},
			MediaType: types.OCILayer,
		})
		if err != nil {
			return nil, err
		}
	}
	file, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	file = file.DeepCopy()
	file.Architecture, file.OS = arch, "linux"
	file.Created = v1.Time{Time: Epoch}
	file.Config = cfg.container()
	return mutate.ConfigFile(img, file)
}

func (c Config) container() v1.Config {
	out := v1.Config{
		Entrypoint: c.Entrypoint,
		Cmd:        c.Cmd,
		User:       c.User,
		WorkingDir: c.WorkingDir,
		Env:        c.Env,
		Labels:     c.Labels,
	}
	if len(c.ExposedPorts) > 0 {
		out.ExposedPorts = map[string]struct{}{}
		for _, p := range c.ExposedPorts {
			out.ExposedPorts[p] = struct{}{}
		}
	}
	return out
}

// ConfigOf reads back the part of an image's configuration a Dockerfile states.
func ConfigOf(img v1.Image) (Config, error) {
	file, err := img.ConfigFile()
	if err != nil {
		return Config{}, err
	}
	c := file.Config
	return Config{
		Entrypoint:   c.Entrypoint,
		Cmd:          c.Cmd,
		User:         c.User,
		WorkingDir:   c.WorkingDir,
		Env:          c.Env,
		ExposedPorts: slices.Sorted(maps.Keys(c.ExposedPorts)),
		Labels:       c.Labels,
	}, nil
}

// Size is the bytes a registry stores for an image: its manifest, config and compressed layers.
func Size(img v1.Image) (int64, error) {
	return blobsSize(img, map[v1.Hash]bool{})
}

// blobsSize is img's manifest and those of its config and layers not in stored, which it adds
// to stored: a registry keeps each blob once, whichever images share it.
func blobsSize(img v1.Image, stored map[v1.Hash]bool) (int64, error) {
	m, err := img.Manifest()
	if err != nil {
		return 0, err
	}
	raw, err := img.RawManifest()
	if err != nil {
		return 0, err
	}
	total := int64(len(raw))
	for _, d := range append([]v1.Descriptor{m.Config}, m.Layers...) {
		if !stored[d.Digest] {
			stored[d.Digest] = true
			total += d.Size
		}
	}
	return total, nil
}

// Index is the OCI image index of imgs, in order, each listed with the platform its
// configuration states: what a runtime picks its node's image from.
func Index(imgs ...v1.Image) (v1.ImageIndex, error) {
	adds := make([]mutate.IndexAddendum, 0, len(imgs))
	for _, img := range imgs {
		file, err := img.ConfigFile()
		if err != nil {
			return nil, err
		}
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			MediaType: types.OCIManifestSchema1,
			Platform:  &v1.Platform{OS: file.OS, Architecture: file.Architecture},
		}})
	}
	return mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), adds...), nil
}

// IndexSize is the bytes a registry stores for an index: its manifest and each image's, a blob
// the images share (the VM disk's one layer) counted once.
func IndexSize(idx v1.ImageIndex) (int64, error) {
	raw, err := idx.RawManifest()
	if err != nil {
		return 0, err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return 0, err
	}
	total, stored := int64(len(raw)), map[v1.Hash]bool{}
	for _, d := range m.Manifests {
		img, err := idx.Image(d.Digest)
		if err != nil {
			return 0, err
		}
		size, err := blobsSize(img, stored)
		if err != nil {
			return 0, err
		}
		total += size
	}
	return total, nil
}

// Transport trusts the system's roots and, when caFile is not empty, the CA in it (a local
// registry's).
func Transport(caFile string) (http.RoundTripper, error) {
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, err
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s holds no PEM certificate", caFile)
		}
	}
	t := remote.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return t, nil
}

// Pushable is an image or an image index.
type Pushable interface {
	remote.Taggable
	Digest() (v1.Hash, error)
}

// Push writes img (an image, or an index with its images) to ref ("host:port/repo:tag") and
// returns the reference by digest.
func Push(img Pushable, ref string, transport http.RoundTripper) (string, error) {
	tag, err := name.NewTag(ref)
	if err != nil {
		return "", err
	}
	if err := remote.Push(tag, img, remote.WithTransport(transport)); err != nil {
		return "", fmt.Errorf("pushing %s: %w", ref, err)
	}
	digest, err := img.Digest()
	if err != nil {
		return "", err
	}
	return tag.Context().Digest(digest.String()).String(), nil
}

// Pull reads the image at ref from its registry.
func Pull(ref string, transport http.RoundTripper) (v1.Image, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return nil, err
	}
	return remote.Image(r, remote.WithTransport(transport))
}
