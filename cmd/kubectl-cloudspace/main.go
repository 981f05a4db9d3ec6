// Command kubectl-cloudspace is the Cloudspace operator's kubectl plugin (internal/plugin):
// on the PATH, kubectl runs it as `kubectl cloudspace`.
package main

import (
	"os"

	"github.com/cloudspace-dev/cloudspace-operator/internal/plugin"
)

func main() {
	os.Exit(plugin.Main(os.Args[1:], os.Stdout, os.Stderr))
}
