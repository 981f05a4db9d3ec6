// Command images builds the project's container images without Docker (make images) and, when
// the real cluster runs (make real-cluster), pushes them to its registry: the bundle then names
// every image by digest. It prints each image's digest and size and records them in a JSON file.
//
//	make images IMAGES_ARGS="[-set product|infra|all] [-registry HOST:PORT|none] [-json FILE] [NAME...]"
//
// It runs from the repository's top directory (make builds it into bin/build-images; bin/images
// is where it works).
package main

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cloudspace-dev/cloudspace-operator/test/infra/images"
	"github.com/cloudspace-dev/cloudspace-operator/test/infra/oci"
	"github.com/cloudspace-dev/cloudspace-operator/test/infra/realcluster"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
}

func run() error {
	set := flag.String("set", "product", "which images: product (what the product ships), infra (the real cluster's stand-ins for upstream images) or all")
	registry := flag.String("registry", "", "push to this registry (host:port); default: the real cluster's when it runs; none: build only")
	jsonPath := flag.String("json", "", "record the images built in this file (default bin/images.json)")
	flag.Parse()
	repo, err := os.Getwd()
	if err != nil {
		return err
	}
	start := time.Now()
	b, transport, err := builder(repo, *registry)
	if err != nil {
		return err
	}
	recipes, err := images.Select(images.All(version(repo)), sets(*set, b.Pinned()), flag.Args())
	if err != nil {
		return err
	}
	unlock, err := b.Lock()
	if err != nil {
		return err
	}
	defer unlock()
	if err := b.PruneLayers(); err != nil {
		return err
	}
	built, err := b.Build(recipes, transport)
	if err != nil {
		return err
	}
	if *jsonPath == "" {
		*jsonPath = filepath.Join(b.Bin, "images.json")
	}
	where := "built only (no registry)"
	if b.Pinned() {
		where = "pushed to " + b.Registry
	}
	fmt.Printf("images: %d %s in %.0fs; recorded in %s\n", len(built), where, time.Since(start).Seconds(), *jsonPath)
	return images.WriteJSON(*jsonPath, built)
}

// sets are the sets to build: pushing the product's images needs the stand-ins its bundle
// names (scorecard's stock image) in the registry too.
func sets(s string, pinned bool) []images.Set {
	switch {
	case s == "all" || (s == string(images.Product) && pinned):
		return []images.Set{images.Infra, images.Product}
	default:
		return []images.Set{images.Set(s)}
	}
}

func builder(repo, registry string) (*images.Builder, http.RoundTripper, error) {
	layout, err := realcluster.DefaultLayout(repo)
	if err != nil {
		return nil, nil, err
	}
	b, err := images.NewBuilder(repo, func(format string, args ...any) { fmt.Printf("images: "+format+"\n", args...) })
	if err != nil {
		return nil, nil, err
	}
	caFile := ""
	switch {
	case registry == "none":
	case registry != "":
		b.Registry = registry
	case fileExists(layout.CA()) && reachable(layout.Registry()):
		b.Registry, caFile = layout.Registry(), layout.CA()
	}
	transport, err := oci.Transport(caFile)
	return b, transport, err
}

// reachable tells whether something listens at addr (the real cluster's registry).
func reachable(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err == nil {
		c.Close()
	}
	return err == nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func version(repo string) string {
	data, _ := os.ReadFile(filepath.Join(repo, "VERSION"))
	return strings.TrimSpace(string(data))
}
