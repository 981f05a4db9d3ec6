package realcluster

import (
	"fmt"
	"strconv"
	"strings"
)

// nodeSetup prepares the node's namespaces, run in them once the holder made them: a private
// /run, /var/lib and /var/log (containerd's, the kubelet's and CNI's fixed paths, the pods'
// logs), the node's resolv.conf, a service account directory, the three kernel settings the kubelet insists on answered from
// files, and the network: loopback, the bridge with the node's address and a default route on it
// (without a route no ClusterIP is reachable), forwarding on (the namespace's own setting).
func (l Layout) nodeSetup() string {
	var b strings.Builder
	w := func(format string, args ...any) { b.WriteString(fmt.Sprintf(format, args...) + "\n") }
	w("set -e")
	w("mount -t tmpfs -o mode=0755 cloudspace-run /run")
	w("mkdir -p /run/containerd")
	w("mount --bind %q /var/lib", l.Path("state", "var-lib"))
	w("mount --bind %q /var/log", l.Path("state", "var-log"))
	w("mount --bind %q /etc/resolv.conf", l.Path("node", "resolv.conf"))
	// Where in-cluster clients look for a service account's token (OLM's package server: see
	// StartOLM).
	w("mkdir -p /run/secrets/kubernetes.io/serviceaccount")
	w("mount --bind %q /run/secrets/kubernetes.io/serviceaccount", l.Path("node", "serviceaccount"))
	for _, s := range overriddenSysctls {
		w("mount --bind %q /proc/sys/%s", l.Path("node", "sysctl", s), s)
	}
	w("ip link set lo up")
	w("ip link add %s type bridge", Bridge)
	w("ip addr add %s/24 dev %s", NodeIP, Bridge)
	w("ip link set %s up", Bridge)
	w("ip route add default dev %s", Bridge)
	w("echo 1 > /proc/sys/net/ipv4/ip_forward")
	return b.String()
}

// daemons are the cluster's processes in the order they start; each phase waits for the one
// before it (see Up).
func (l Layout) daemons(self string, holder int) [][]daemon {
	bin := func(name string) string { return l.Bin + "/" + name }
	pki := func(name string) string { return l.Path("pki", name) }
	node := func(name string) string { return l.Path("node", name) }
	storage := []daemon{
		{name: "forwarder", bin: self, host: true, args: []string{"forward", "--holder", strconv.Itoa(holder),
			"127.0.0.1:" + strconv.Itoa(l.APIPort) + "=" + NodeIP + ":" + strconv.Itoa(APIPort),
			l.Registry() + "=" + l.Registry()}},
		{name: "etcd", bin: bin("etcd"), args: []string{"--name", "real", "--data-dir", l.Path("state", "etcd"),
			"--listen-client-urls", "http://127.0.0.1:2379", "--advertise-client-urls", "http://127.0.0.1:2379",
			"--listen-peer-urls", "http://127.0.0.1:2380", "--initial-advertise-peer-urls", "http://127.0.0.1:2380",
			"--initial-cluster", "real=http://127.0.0.1:2380", "--unsafe-no-fsync", "--log-level", "warn"}},
		{name: "registry", bin: bin("registry"), args: []string{"serve", node("registry.yaml")},
			env: []string{"OTEL_TRACES_EXPORTER=none"}},
		{name: "containerd", bin: bin("containerd"), args: []string{"--config", node("containerd.toml"), "--log-level", "warn"}},
	}
	api := []daemon{{name: "kube-apiserver", bin: bin("kube-apiserver"), args: []string{
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
		// The node's name resolves nowhere: the API server reaches the kubelet at its address.
		"--kubelet-preferred-address-types=InternalIP",
	}}}
	common := func(name string) []string {
		return []string{"--kubeconfig=" + node(name+".kubeconfig"), "--authentication-kubeconfig=" + node(name+".kubeconfig"),
			"--authorization-kubeconfig=" + node(name+".kubeconfig"), "--bind-address=127.0.0.1", "--leader-elect=false"}
	}
	nodeDaemons := []daemon{
		{name: "kube-controller-manager", bin: bin("kube-controller-manager"), args: append(common("controller-manager"),
			"--service-account-private-key-file="+pki("sa.key"), "--root-ca-file="+pki("ca.crt"),
			"--cluster-signing-cert-file="+pki("ca.crt"), "--cluster-signing-key-file="+pki("ca.key"),
			"--use-service-account-credentials=true", "--service-cluster-ip-range="+ServiceCIDR)},
		{name: "kube-scheduler", bin: bin("kube-scheduler"), args: common("scheduler")},
		{name: "kubelet", bin: bin("kubelet"), args: []string{"--config=" + node("kubelet.yaml"),
			"--kubeconfig=" + node("kubelet.kubeconfig"), "--hostname-override=" + NodeName, "--node-ip=" + NodeIP,
			"--node-labels=" + NodeLabels, "--v=1"}},
		{name: "kube-proxy", bin: bin("kube-proxy"), args: []string{"--config=" + node("kube-proxy.yaml")}},
		{name: "coredns", bin: bin("coredns"), args: []string{"-conf", node("Corefile")}},
		{name: "provisioner", bin: self, args: []string{"provision", "--kubeconfig", l.NodeKubeconfig(), "--dir", l.Path("state", "volumes")}},
	}
	return [][]daemon{storage, api, nodeDaemons}
}
