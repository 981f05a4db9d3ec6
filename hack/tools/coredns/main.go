// Command coredns is CoreDNS with only the plugins the real cluster's DNS uses (hack/real-cluster.sh):
// the whole plugin set pulls in every cloud provider's SDK and triples the build.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
)

// directives is the execution order of the plugins above, as in CoreDNS's plugin.cfg.
var directives = []string{"ready", "health", "errors", "log", "cache", "kubernetes"}

func main() {
	if err := dnsserver.SetDirectives(directives); err != nil {
		panic(err)
	}
	coremain.Run()
}
