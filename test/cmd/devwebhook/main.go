// Command devwebhook readies the admission webhooks for an operator run outside the cluster
// (make run): it issues a serving certificate for 127.0.0.1 from a local CA in -dir and points
// the cluster's webhook configurations (config/webhook) at https://<-addr> with that CA.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cloudspace-dev/cloudspace-operator/test/infra/devwebhook"
)

func main() {
	dir := flag.String("dir", "", "directory of the CA and the serving certificate (the operator's --webhook-cert-dir)")
	addr := flag.String("addr", "127.0.0.1:9444", "address the operator serves the webhooks on (its --webhook-bind-address)")
	manifests := flag.String("manifests", "config/webhook/manifests.yaml", "the webhook configurations controller-gen writes")
	flag.Parse()
	if err := run(*dir, *addr, *manifests); err != nil {
		fmt.Fprintln(os.Stderr, "devwebhook:", err)
		os.Exit(1)
	}
}

func run(dir, addr, manifests string) error {
	if dir == "" {
		return fmt.Errorf("-dir is required")
	}
	files, err := devwebhook.Issue(dir, 30*24*time.Hour)
	if err != nil {
		return err
	}
	ca, err := os.ReadFile(files.CA)
	if err != nil {
		return err
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := devwebhook.Configure(ctx, c, manifests, "https://"+addr, ca); err != nil {
		return err
	}
	fmt.Printf("devwebhook: webhooks point at https://%s, certificate in %s\n", addr, dir)
	return nil
}
