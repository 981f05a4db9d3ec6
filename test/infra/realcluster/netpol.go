package realcluster

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// enforcerHealthPort is where each node's enforcer answers /healthz, inside the node.
const enforcerHealthPort = 20244

// enforcer is the node's NetworkPolicy enforcer: kube-router (v2.1.0, built from source) with
// its firewall alone, neither routing nor service proxy (kube-proxy serves Services). It is
// iptables and ipset in the node's own network namespace, which this kernel supports; SIG
// Network's kube-network-policies needs the nftables queue expression, which it does not
// (README, "A real cluster"). Bridged pod-to-pod traffic reaches its rules through the bridge's
// netfilter hook (bridge-nf-call-iptables, on in every new namespace).
func (l Layout) enforcer(n Node) daemon {
	return daemon{name: n.daemon("kube-router"), node: n.Name, bin: l.Bin + "/kube-router", args: []string{
		"--run-firewall=true", "--run-router=false", "--run-service-proxy=false",
		"--kubeconfig=" + l.NodeKubeconfig(), "--hostname-override=" + n.Name,
		"--service-cluster-ip-range=" + ServiceCIDR,
		"--health-port=" + strconv.Itoa(enforcerHealthPort), "--metrics-port=0",
	}}
}

// waitEnforcers waits until every node's enforcer answers its health check, which it does once
// its first full sync of the policies ran.
func (l Layout) waitEnforcers(ctx context.Context) error {
	for _, n := range l.Nodes() {
		if err := l.waitEnforcer(ctx, n); err != nil {
			return err
		}
	}
	return nil
}

// waitEnforcer waits until the node's enforcer answers its health check.
func (l Layout) waitEnforcer(ctx context.Context, n Node) error {
	holder, err := l.pid(holderName(n.Name))
	if err != nil {
		return err
	}
	url := fmt.Sprintf("http://127.0.0.1:%d/healthz", enforcerHealthPort)
	return l.waitHTTP(ctx, holder, url, "the NetworkPolicy enforcer of "+n.Name)
}

// Outside serves HTTP on each address (host:port) until ctx ends, answering every request with
// "outside ADDRESS": the fabric's stand-ins for a host on the internet and for a cloud's
// metadata service, which tests reach (or must not reach) from pods.
func Outside(ctx context.Context, addrs []string) error {
	errs := make(chan error, len(addrs))
	for _, addr := range addrs {
		srv := &http.Server{Addr: addr, ReadHeaderTimeout: 5 * time.Second,
			Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintf(w, "outside %s\n", addr) })}
		context.AfterFunc(ctx, func() { _ = srv.Close() })
		go func() { errs <- srv.ListenAndServe() }()
	}
	select {
	case <-ctx.Done():
		return nil
	case err := <-errs:
		return err
	}
}
