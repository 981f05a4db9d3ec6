package app

import (
	"flag"
	"strings"
	"testing"
)

func TestManagerOptions(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	var o Options
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	o.BindFlags(fs)
	if err := fs.Parse([]string{"--metrics-bind-address=:8443"}); err != nil {
		t.Fatal(err)
	}
	o.WatchNamespaces = []string{"dev", "staging"}
	opts, err := ManagerOptions(o)
	if err != nil {
		t.Fatal(err)
	}
	if len(opts.Cache.DefaultNamespaces) != 2 || opts.Metrics.FilterProvider == nil {
		t.Errorf("manager options: namespaces %v, metrics filter set %v", opts.Cache.DefaultNamespaces, opts.Metrics.FilterProvider != nil)
	}
	if opts.WebhookServer != nil || opts.LeaderElection {
		t.Errorf("by default outside a cluster: webhook server %v, leader election %v; want neither", opts.WebhookServer, opts.LeaderElection)
	}
}

// TestWebhookServer: the webhooks are served at a host and port, and a bad address is refused
// naming its flag.
func TestWebhookServer(t *testing.T) {
	for addr, valid := range map[string]bool{"0": true, "": true, ":9444": true, "127.0.0.1:9444": true, "9444": false, ":https": false} {
		o := Options{WebhookAddr: addr}
		srv, err := webhookServer(o, nil)
		switch {
		case !valid && (err == nil || !strings.Contains(err.Error(), "--webhook-bind-address")):
			t.Errorf("%q: %v, want an error naming --webhook-bind-address", addr, err)
		case valid && err != nil:
			t.Errorf("%q: %v", addr, err)
		case valid && (srv != nil) != o.ServesWebhooks():
			t.Errorf("%q: server %v, want one only when the webhooks are served", addr, srv)
		}
	}
}
