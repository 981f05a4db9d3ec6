// Command bundlecrds puts back into bundle/manifests the CRD specs operator-sdk drops fields of
// (KeepCRDSpecs, crds.go): make bundle pipes `kustomize build config/crd` into it.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
)

func main() {
	manifests := flag.String("manifests", "bundle/manifests", "the bundle's manifests directory")
	flag.Parse()
	built, err := io.ReadAll(os.Stdin)
	if err == nil {
		err = KeepCRDSpecs(*manifests, built)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bundlecrds:", err)
		os.Exit(1)
	}
}
