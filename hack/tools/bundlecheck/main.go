// Command bundlecheck runs every validator that github.com/operator-framework/api offers on an
// operator bundle, as OperatorHub's catalogs run them, and fails on any error or warning.
//
// Usage: bundlecheck [-k8s-version 1.34] [-index-path bundle.Dockerfile] BUNDLE_DIR
//
// It lives in a wrapper module of its own (hack/tools.sh builds it into bin/) because the
// validators' release needs newer Kubernetes libraries than the operator is built with.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/operator-framework/api/pkg/manifests"
	"github.com/operator-framework/api/pkg/validation"
	"github.com/operator-framework/api/pkg/validation/errors"
)

func main() {
	k8sVersion := flag.String("k8s-version", "", "the Kubernetes version the deprecated-API checks use (default: the CSV's minKubeVersion)")
	indexPath := flag.String("index-path", "", "the bundle's Dockerfile, whose labels the community checks read")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: bundlecheck [-k8s-version V] [-index-path FILE] BUNDLE_DIR")
		os.Exit(2)
	}
	bundle, err := manifests.GetBundleFromDir(flag.Arg(0))
	if err != nil {
		fmt.Fprintf(os.Stderr, "bundlecheck: loading %s: %v\n", flag.Arg(0), err)
		os.Exit(1)
	}
	// The images are not inspected (no container tool here): the multi-architecture checks
	// read the CSV's labels and what they promise.
	optional := map[string]string{"k8s-version": *k8sVersion, "index-path": *indexPath, "container-tools": "none"}
	findings := report(validation.AllValidators.Validate(bundle, optional))
	if findings > 0 {
		fmt.Fprintf(os.Stderr, "bundlecheck: %d errors and warnings\n", findings)
		os.Exit(1)
	}
	fmt.Println("bundlecheck: every validator passed with no warning")
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
