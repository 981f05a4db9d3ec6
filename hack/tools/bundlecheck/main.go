// Command bundlecheck runs every validator that github.com/operator-framework/api offers on an
// operator bundle, as OperatorHub's catalogs run them, and fails on any error or warning.
//
// Usage: bundlecheck [-k8s-version 1.34] [-index-path bundle.Dockerfile] [-inspect] BUNDLE_DIR
//
// With -inspect, the multi-architecture checks read each image's platforms from its registry
// (docker.go): the bundle must name images that are there, as the real cluster's pinned
// bundle does.
//
// It lives in a wrapper module of its own (hack/tools.sh builds it into bin/) because the
// validators' release needs newer Kubernetes libraries than the operator is built with.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/operator-framework/api/pkg/manifests"
	"github.com/operator-framework/api/pkg/validation"
	"github.com/operator-framework/api/pkg/validation/errors"
)

func main() {
	if filepath.Base(os.Args[0]) == dockerName {
		if err := asDocker(os.Args[1:]); err != nil {
			fmt.Fprintf(os.Stderr, "%v\n", err)
			os.Exit(1)
		}
		return
	}
	os.Exit(run())
}

// run checks the bundle the command line names and returns the exit code.
func run() int {
	k8sVersion := flag.String("k8s-version", "", "the Kubernetes version the deprecated-API checks use (default: the CSV's minKubeVersion)")
	indexPath := flag.String("index-path", "", "the bundle's Dockerfile, whose labels the community checks read")
	inspect := flag.Bool("inspect", false, "answer the multi-architecture check's image inspection from the images' own registry, acting as its docker (the registry must hold them); without it, a docker on PATH is run, if any")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: bundlecheck [-k8s-version V] [-index-path FILE] [-inspect] BUNDLE_DIR")
		return 2
	}
	bundle, err := manifests.GetBundleFromDir(flag.Arg(0))
	if err != nil {
		fmt.Fprintf(os.Stderr, "bundlecheck: loading %s: %v\n", flag.Arg(0), err)
		return 1
	}
	if *inspect {
		dir, err := linkDocker()
		if err != nil {
			fmt.Fprintf(os.Stderr, "bundlecheck: %v\n", err)
			return 1
		}
		defer os.RemoveAll(dir)
		os.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	}
	optional := map[string]string{"k8s-version": *k8sVersion, "index-path": *indexPath, "container-tools": dockerName}
	if findings := report(validation.AllValidators.Validate(bundle, optional)); findings > 0 {
		fmt.Fprintf(os.Stderr, "bundlecheck: %d errors and warnings\n", findings)
		return 1
	}
	fmt.Println("bundlecheck: every validator passed with no warning")
	return 0
}

// report prints every error and warning with its level and returns how many there were.
func report(results []errors.ManifestResult) int {
	n := 0
	for _, r := range results {
		for _, e := range r.Errors {
			fmt.Printf("%s: %s: %s\n", e.Level, r.Name, e.Error())
			n++
		}
		for _, w := range r.Warnings {
			fmt.Printf("%s: %s: %s\n", w.Level, r.Name, w.Error())
			n++
		}
	}
	return n
}
