package realcluster

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// nodeAPI is the API server's address inside the node's network namespace.
var nodeAPI = "https://" + net.JoinHostPort(NodeIP, strconv.Itoa(APIPort))

// writeKubeconfigs writes the administrator's kubeconfig for the host and one for each
// component inside the node, each with its own client certificate.
func (l Layout) writeKubeconfigs() error {
	hostAPI := "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(l.APIPort))
	files := map[string][2]string{
		l.Kubeconfig():     {hostAPI, "admin"},
		l.NodeKubeconfig(): {nodeAPI, "admin"},
		l.Path("node", "controller-manager.kubeconfig"): {nodeAPI, "controller-manager"},
		l.Path("node", "scheduler.kubeconfig"):          {nodeAPI, "scheduler"},
		l.Path("node", "kube-proxy.kubeconfig"):         {nodeAPI, "kube-proxy"},
	}
	for path, f := range files {
		if err := l.writeKubeconfig(path, f[0], f[1]); err != nil {
			return fmt.Errorf("writing %s: %w", path, err)
		}
	}
	return nil
}

func (l Layout) writeKubeconfig(path, server, cert string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["real"] = &clientcmdapi.Cluster{Server: server, CertificateAuthority: l.CA()}
	cfg.AuthInfos[cert] = &clientcmdapi.AuthInfo{
		ClientCertificate: l.Path("pki", cert+".crt"),
		ClientKey:         l.Path("pki", cert+".key"),
	}
	cfg.Contexts["real"] = &clientcmdapi.Context{Cluster: "real", AuthInfo: cert}
	cfg.CurrentContext = "real"
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return clientcmd.WriteToFile(*cfg, path)
}

// writeNodeFiles writes the configuration of the registry and the files the nodes' mount
// namespaces put in place of the host's (resolv.conf, the kubelet's three kernel settings). The
// nodes resolve names through the cluster's DNS Service, as their OLM processes must.
func (l Layout) writeNodeFiles() error {
	files := map[string]string{
		l.Path("node", "certs.d", l.Registry(), "hosts.toml"): l.registryHosts(),
		l.Path("node", "certs.d", "_default", "hosts.toml"):   l.mirrorHosts(),
		l.Path("node", "registry.yaml"):                       l.registryConfig(),
		l.Path("node", "resolv.conf"):                         "nameserver " + DNSServiceIP + "\nsearch " + ClusterDomain + "\noptions ndots:5\n",
		l.Path("node", "pod-resolv.conf"):                     "nameserver " + DNSServiceIP + "\n",
		l.Path("node", "sysctl", "vm", "overcommit_memory"):   "1\n",
		l.Path("node", "sysctl", "kernel", "panic"):           "10\n",
		l.Path("node", "sysctl", "kernel", "panic_on_oops"):   "1\n",
	}
	return writeFiles(files)
}

// writeNodeConfig writes the node's own configuration: its kubelet's kubeconfig, containerd,
// the CNI network, the kubelet and kube-proxy.
func (l Layout) writeNodeConfig(n Node) error {
	if err := l.writeKubeconfig(l.nodePath(n, "kubelet.kubeconfig"), nodeAPI, "kubelet-client-"+n.Name); err != nil {
		return err
	}
	return writeFiles(map[string]string{
		l.nodePath(n, "containerd.toml"):               l.containerdConfig(n),
		l.nodePath(n, "cni", "10-cloudspace.conflist"): cniConfig(n),
		l.nodePath(n, "kubelet.yaml"):                  l.kubeletConfig(n),
		l.nodePath(n, "kube-proxy.yaml"):               l.kubeProxyConfig(n),
	})
}

// writeFiles writes each file, making its directory.
func writeFiles(files map[string]string) error {
	for path, content := range files {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// overriddenSysctls are the kernel settings the kubelet insists on, which the node's mount
// namespace answers from files (node/sysctl/...) rather than letting it change the host's.
var overriddenSysctls = []string{"vm/overcommit_memory", "kernel/panic", "kernel/panic_on_oops"}

// containerdConfig is containerd 2's configuration: its state under the node's private /run
// and /var/lib, runc from Debian with cgroupfs, the CNI network, the pause image from the
// registry, and the registry's CA. restrict_oom_score_adj: this machine grants no
// CAP_SYS_RESOURCE, and runc fails every sandbox that lowers its oom_score_adj.
// enable_unprivileged_ports and _icmp false: what containerd 1.x (and many clusters) do, so a
// pod that binds a port below 1024 as non-root without asking for it fails here as it would
// there (containerd 2 defaults to true, which hid the VM launcher's SSH forward failing).
func (l Layout) containerdConfig(n Node) string {
	return fmt.Sprintf(`version = 3
root = "/var/lib/containerd"
state = "/run/containerd"

[grpc]
  address = "/run/containerd/containerd.sock"

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = %q
  [plugins.'io.containerd.cri.v1.images'.registry]
    config_path = %q

[plugins.'io.containerd.transfer.v1.local']
  config_path = %q

[plugins.'io.containerd.cri.v1.runtime']
  restrict_oom_score_adj = true
  enable_unprivileged_ports = false
  enable_unprivileged_icmp = false
  enable_cdi = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = %q
  [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
      SystemdCgroup = false
      BinaryName = "/usr/sbin/runc"
`, l.PauseImage(), l.Path("node", "certs.d"), l.Path("node", "certs.d"), l.nodePath(n, "cni"))
}

// PauseImage is the pod sandbox image, pushed to the registry by Up.
func (l Layout) PauseImage() string { return l.Registry() + "/pause:3.10" }

func (l Layout) registryHosts() string {
	return fmt.Sprintf("server = \"https://%[1]s\"\n\n[host.\"https://%[1]s\"]\n  capabilities = [\"pull\", \"resolve\"]\n  ca = %[2]q\n",
		l.Registry(), l.CA())
}

// mirrorHosts makes the registry the mirror of every other one, as a disconnected cluster's
// nodes are set up: an image named by its upstream reference is pulled from the registry under
// the same path (operator-sdk's bundle-upgrade runs a fixed upstream busybox reference, for one).
// There is no fallback to the upstream registry: nothing beyond the machine is reachable.
func (l Layout) mirrorHosts() string {
	return fmt.Sprintf("[host.\"https://%s\"]\n  capabilities = [\"pull\", \"resolve\"]\n  ca = %q\n", l.Registry(), l.CA())
}

// cniConfig attaches the node's pods to its bridge, which is their gateway; portmap serves
// hostPort.
func cniConfig(n Node) string {
	return fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "cloudspace",
  "plugins": [
    {
      "type": "bridge",
      "bridge": %[1]q,
      "isGateway": true,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": %[2]q, "rangeStart": "10.222.%[3]d.10", "rangeEnd": "10.222.%[3]d.250", "gateway": %[4]q}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`, Bridge, n.Subnet(), n.Index, n.IP())
}

// kubeletConfig runs the node's kubelet on cgroup v1 with cgroupfs under its own cgroup root
// (no systemd here), serving on the node's address with its CA-signed certificate and
// authorizing through the API server. Evictions are set low: the nodes share the machine's disk
// with everything else.
func (l Layout) kubeletConfig(n Node) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %[1]s
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %[2]q}
authorization: {mode: Webhook}
tlsCertFile: %[3]q
tlsPrivateKeyFile: %[4]q
cgroupDriver: cgroupfs
cgroupRoot: %[5]s
failCgroupV1: false
failSwapOn: false
clusterDNS: [%[8]s]
clusterDomain: %[6]s
resolvConf: %[7]q
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
serializeImagePulls: false
evictionHard: {memory.available: 100Mi, nodefs.available: 1%%, imagefs.available: 1%%, nodefs.inodesFree: 1%%}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
maxPods: 110
`, n.IP(), l.CA(), l.Path("pki", "kubelet-"+n.Name+".crt"), l.Path("pki", "kubelet-"+n.Name+".key"), n.cgroupRoot(), ClusterDomain,
		l.Path("node", "pod-resolv.conf"), DNSServiceIP)
}

// kubeProxyConfig runs the node's kube-proxy in iptables mode, inside its network namespace.
// conntrack's maxPerCore 0 and zero timeouts leave the host-wide conntrack settings alone;
// Service traffic between pods keeps its source address (no masqueradeAll), so that a
// NetworkPolicy on the endpoint's node sees which pod calls it: with masqueradeAll a gateway
// pod reached its IDE by pod address but not through the IDE's Service from another node (the
// policy saw the node's address). A pod reaches a Service whose endpoint is on its own bridge
// through the bridge's netfilter hook, which undoes the translation of the reply.
func (l Layout) kubeProxyConfig(n Node) string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: %q}
mode: iptables
clusterCIDR: %s
hostnameOverride: %s
bindAddress: %s
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
`, l.Path("node", "kube-proxy.kubeconfig"), ClusterCIDR, n.Name, n.IP())
}

// registryConfig serves images over TLS (the CA-signed certificate) on 127.0.0.1 in the node.
func (l Layout) registryConfig() string {
	return fmt.Sprintf(`version: 0.1
log: {level: warn}
storage:
  filesystem: {rootdirectory: %q}
  delete: {enabled: true}
http:
  addr: %s
  tls: {certificate: %q, key: %q}
`, l.Path("state", "registry"), l.Registry(), l.Path("pki", "registry.crt"), l.Path("pki", "registry.key"))
}
