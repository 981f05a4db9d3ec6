package realcluster

import (
	"strconv"
)

// daemons are the cluster's processes in the order they start; each phase waits for the one
// before it (see Up). self is this program, cp the control-plane node's holder (the forwarders
// dial into its namespace).
func (l Layout) daemons(self string, cp int) [][]daemon {
	bin := func(name string) string { return l.Bin + "/" + name }
	pki := func(name string) string { return l.Path("pki", name) }
	node := func(name string) string { return l.Path("node", name) }
	storage := []daemon{
		{name: "forwarder", bin: self, args: []string{"forward", "--holder", strconv.Itoa(cp),
			"127.0.0.1:" + strconv.Itoa(l.APIPort) + "=" + NodeIP + ":" + strconv.Itoa(APIPort),
			l.Registry() + "=" + l.Registry()}},
		{name: "outside", bin: self, node: fabric, args: []string{"outside", OutsideIP + ":80", MetadataIP + ":80"}},
		{name: "etcd", node: NodeName, bin: bin("etcd"), args: []string{"--name", "real", "--data-dir", l.Path("state", "etcd"),
			"--listen-client-urls", "http://127.0.0.1:2379", "--advertise-client-urls", "http://127.0.0.1:2379",
			"--listen-peer-urls", "http://127.0.0.1:2380", "--initial-advertise-peer-urls", "http://127.0.0.1:2380",
			"--initial-cluster", "real=http://127.0.0.1:2380", "--unsafe-no-fsync", "--log-level", "warn"}},
		{name: "registry", node: NodeName, bin: bin("registry"), args: []string{"serve", node("registry.yaml")},
			env: []string{"OTEL_TRACES_EXPORTER=none"}},
	}
	api := []daemon{{name: "kube-apiserver", node: NodeName, bin: bin("kube-apiserver"), args: []string{
		"--etcd-servers=http://127.0.0.1:2379",
		"--bind-address=" + NodeIP, "--advertise-address=" + NodeIP, "--secure-port=" + strconv.Itoa(APIPort),
		"--service-cluster-ip-range=" + ServiceCIDR,
		"--client-ca-file=" + pki("ca.crt"), "--tls-cert-file=" + pki("apiserver.crt"), "--tls-private-key-file=" + pki("apiserver.key"),
		"--service-account-issuer=https://kubernetes.default.svc." + ClusterDomain,
		"--service-account-key-file=" + pki("sa.pub"), "--service-account-signing-key-file=" + pki("sa.key"),
		"--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction",
		"--kubelet-client-certificate=" + pki("apiserver-kubelet-client.crt"), "--kubelet-client-key=" + pki("apiserver-kubelet-client.key"),
		"--requestheader-client-ca-file=" + pki("front-proxy-ca.crt"), "--requestheader-allowed-names=front-proxy-client",
		"--requestheader-username-headers=X-Remote-User", "--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + pki("front-proxy-client.crt"), "--proxy-client-key-file=" + pki("front-proxy-client.key"),
		"--enable-aggregator-routing=true", "--allow-privileged=true", "--profiling=false",
		// The nodes' names resolve nowhere: the API server reaches each kubelet at its address.
		"--kubelet-preferred-address-types=InternalIP",
	}}}
	common := func(name string) []string {
		return []string{"--kubeconfig=" + node(name+".kubeconfig"), "--authentication-kubeconfig=" + node(name+".kubeconfig"),
			"--authorization-kubeconfig=" + node(name+".kubeconfig"), "--bind-address=127.0.0.1", "--leader-elect=false"}
	}
	control := []daemon{
		{name: "kube-controller-manager", node: NodeName, bin: bin("kube-controller-manager"), args: append(common("controller-manager"),
			"--service-account-private-key-file="+pki("sa.key"), "--root-ca-file="+pki("ca.crt"),
			"--cluster-signing-cert-file="+pki("ca.crt"), "--cluster-signing-key-file="+pki("ca.key"),
			"--use-service-account-credentials=true", "--service-cluster-ip-range="+ServiceCIDR)},
		{name: "kube-scheduler", node: NodeName, bin: bin("kube-scheduler"), args: common("scheduler")},
		{name: "provisioner", node: NodeName, bin: self, args: []string{"provision", "--kubeconfig", l.NodeKubeconfig(), "--dir", l.Path("state", "volumes")}},
	}
	var enforcers []daemon
	for _, n := range l.Nodes() {
		var reg Registration
		if n.Index == 0 {
			reg.Labels = NodeLabels
		}
		own := l.nodeDaemons(self, cp, n, reg)
		storage = append(storage, own[0]...)
		control = append(control, own[1]...)
		enforcers = append(enforcers, own[2]...)
	}
	return [][]daemon{storage, api, control, enforcers}
}

// Registration is how a node's kubelet registers it: with labels (k=v,...) and taints
// (k=v:Effect,...).
type Registration struct {
	Labels, Taints string
}

// nodeDaemons are the node's own processes by phase (those of daemons): its containerd (and on
// a worker, the registry's forwarder), its kubelet registering the node as reg says and
// kube-proxy, and its NetworkPolicy enforcer.
func (l Layout) nodeDaemons(self string, cp int, n Node, reg Registration) [3][]daemon {
	var storage []daemon
	storage = append(storage, daemon{name: n.daemon("containerd"), node: n.Name, bin: l.Bin + "/containerd",
		args: []string{"--config", l.nodePath(n, "containerd.toml"), "--log-level", "warn"}})
	if n.Index > 0 {
		// The registry is 127.0.0.1:RegistryPort on every node, as on the host.
		storage = append(storage, daemon{name: n.daemon("registry-forwarder"), node: n.Name, bin: self,
			args: []string{"forward", "--holder", strconv.Itoa(cp), l.Registry() + "=" + l.Registry()}})
	}
	kubelet := []string{"--config=" + l.nodePath(n, "kubelet.yaml"),
		"--kubeconfig=" + l.nodePath(n, "kubelet.kubeconfig"), "--hostname-override=" + n.Name, "--node-ip=" + n.IP(),
		"--node-labels=" + reg.Labels, "--v=1"}
	if reg.Taints != "" {
		kubelet = append(kubelet, "--register-with-taints="+reg.Taints)
	}
	node := []daemon{
		{name: n.daemon("kubelet"), node: n.Name, bin: l.Bin + "/kubelet", args: kubelet},
		{name: n.daemon("kube-proxy"), node: n.Name, bin: l.Bin + "/kube-proxy", args: []string{"--config=" + l.nodePath(n, "kube-proxy.yaml")}},
	}
	return [3][]daemon{storage, node, {l.enforcer(n)}}
}
