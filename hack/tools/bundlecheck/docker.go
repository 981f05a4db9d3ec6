package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// dockerName is the name the multi-architecture validator runs its container tool by: it runs
// "docker pull IMAGE" and "docker manifest inspect IMAGE", whatever container-tools says. With
// -inspect, bundlecheck links itself under that name at the head of PATH and answers both from
// the images' registry, so that no container engine is needed.
const dockerName = "docker"

// asDocker answers the validator's two docker commands for an image in a registry: pull
// succeeds when its manifest is there, and manifest inspect prints its platforms as docker's
// manifest list does. -inspect serves registries over plain HTTP (a lab's, on loopback).
func asDocker(args []string) error {
	if len(args) == 2 && args[0] == "pull" {
		_, err := platforms(args[1])
		return err
	}
	if len(args) == 3 && args[0] == "manifest" && args[1] == "inspect" {
		ps, err := platforms(args[2])
		if err != nil {
			return err
		}
		type entry struct {
			Platform v1.Platform `json:"platform"`
		}
		list := struct {
			Manifests []entry `json:"manifests"`
		}{}
		for _, p := range ps {
			list.Manifests = append(list.Manifests, entry{Platform: p})
		}
		return json.NewEncoder(os.Stdout).Encode(list)
	}
	return fmt.Errorf("bundlecheck as docker answers only pull and manifest inspect, not %q", args)
}

// platforms are an image's platforms: its index's entries, or its one image's config.
func platforms(image string) ([]v1.Platform, error) {
	ref, err := name.ParseReference(image, name.Insecure)
	if err != nil {
		return nil, err
	}
	desc, err := remote.Get(ref)
	if err != nil {
		return nil, err
	}
	if desc.MediaType.IsIndex() {
		index, err := desc.ImageIndex()
		if err != nil {
			return nil, err
		}
		manifest, err := index.IndexManifest()
		if err != nil {
			return nil, err
		}
		var ps []v1.Platform
		for _, m := range manifest.Manifests {
			if m.Platform != nil {
				ps = append(ps, *m.Platform)
			}
		}
		return ps, nil
	}
	img, err := desc.Image()
	if err != nil {
		return nil, err
	}
	config, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	return []v1.Platform{{OS: config.OS, Architecture: config.Architecture, Variant: config.Variant}}, nil
}

// linkDocker makes a directory holding this program as docker and returns it, to be put at
// the head of PATH.
func linkDocker() (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "bundlecheck-")
	if err != nil {
		return "", err
	}
	return dir, os.Symlink(self, filepath.Join(dir, dockerName))
}
