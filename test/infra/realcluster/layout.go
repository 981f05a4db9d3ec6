// Package realcluster runs a Kubernetes cluster of real nodes on this machine (make
// real-cluster): etcd, kube-apiserver, kube-controller-manager, kube-scheduler, and on every
// node containerd, kubelet, kube-proxy and kube-router's NetworkPolicy enforcer, all built from
// source, with a registry, CoreDNS, a volume provisioner and OLM. Each node lives in a private
// network and mount namespace of its own, held open by a holder process; a fabric namespace
// joins them (a bridge and veth pairs) and stands in for the world outside the cluster. Nothing
// on the host changes: no sysctl, iptables rule, route or mount. The only host objects it makes
// are its own directory, the kubelets' cgroups (removed by Down) and two listeners on 127.0.0.1
// (the API server and the registry, forwarded into the control-plane node).
package realcluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// The cluster's network. Node k (0 is the control-plane node) has the pod subnet 10.222.k.0/24
// on its bridge, whose first address is the node's own; the fabric joins the nodes at
// 10.221.0.(k+1) and routes each subnet to its node.
const (
	// NodeName is the control-plane node's name; it runs pods too.
	NodeName = "real-node"
	// WorkerPrefix names the workers: real-worker-1, real-worker-2...
	WorkerPrefix = "real-worker-"
	// Bridge carries each node's address; pods are attached to it by the CNI bridge plugin.
	Bridge = "cs0"
	// NodeIP is the control-plane node's address: the API server's, the registry's.
	NodeIP = "10.222.0.1"
	// ClusterCIDR holds every node's pod subnet.
	ClusterCIDR = "10.222.0.0/16"
	// FabricBridge joins the nodes in the fabric's namespace.
	FabricBridge = "fabric0"
	// FabricGateway is the fabric's own address, every node's default route.
	FabricGateway = "10.221.0.254"
	// OutsideIP stands in for an address on the internet: the fabric serves HTTP on it, outside
	// every range of the cluster.
	OutsideIP = "192.0.2.10"
	// MetadataIP is the cloud metadata address, which the fabric serves too, so that a pod that
	// may reach it is seen to.
	MetadataIP = "169.254.169.254"
	// DNSServiceIP is the kube-dns Service's ClusterIP (CoreDNS runs as pods, as in any cluster).
	DNSServiceIP = "10.96.0.10"
	// ServiceCIDR holds ClusterIPs; the API server's is the first.
	ServiceCIDR = "10.96.0.0/16"
	// APIServiceIP is the kubernetes Service's ClusterIP.
	APIServiceIP = "10.96.0.1"
	// APIPort is kube-apiserver's port on NodeIP.
	APIPort = 6443
	// ClusterDomain is the cluster's DNS domain, served by CoreDNS on NodeIP:53.
	ClusterDomain = "cluster.local"
	// CgroupRoot holds each kubelet's cgroup root (CgroupRoot/NODE) in every cgroup v1 hierarchy.
	CgroupRoot = "/cloudspace-real"
	// NodeLabels mark the control-plane node as GenericDaemon tests expect (logs=true, as
	// dev-node-1 on KWOK); the workers carry none of them.
	NodeLabels = "logs=true,cloudspace.dev/pool=general"
	// MaxWorkers bounds REAL_NODES.
	MaxWorkers = 6
)

// Layout is where a cluster keeps its state, and the host ports it is reached on.
type Layout struct {
	// Dir holds everything the cluster makes on the host.
	Dir string
	// Bin holds the binaries (the repository's bin/).
	Bin string
	// APIPort is the API server's port on the host's 127.0.0.1.
	APIPort int
	// RegistryPort is the registry's port on 127.0.0.1, the same on the host and in every node:
	// an image is named 127.0.0.1:RegistryPort/... on all sides.
	RegistryPort int
	// Workers is how many worker nodes join the control-plane node.
	Workers int
}

// DefaultLayout is the layout of make real-cluster: REAL_CLUSTER_DIR (default
// <repo>/.real-cluster), REAL_CLUSTER_API_PORT (16443), REAL_CLUSTER_REGISTRY_PORT (15000) and
// REAL_NODES, the number of workers (2; 0 to MaxWorkers).
func DefaultLayout(repo string) (Layout, error) {
	l := Layout{
		Dir:          envOr("REAL_CLUSTER_DIR", filepath.Join(repo, ".real-cluster")),
		Bin:          filepath.Join(repo, "bin"),
		APIPort:      16443,
		RegistryPort: 15000,
		Workers:      2,
	}
	if v := os.Getenv("REAL_NODES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > MaxWorkers {
			return l, fmt.Errorf("REAL_NODES=%q: want a number of workers from 0 to %d", v, MaxWorkers)
		}
		l.Workers = n
	}
	for name, port := range map[string]*int{"REAL_CLUSTER_API_PORT": &l.APIPort, "REAL_CLUSTER_REGISTRY_PORT": &l.RegistryPort} {
		if v := os.Getenv(name); v != "" {
			p, err := strconv.Atoi(v)
			if err != nil || p < 1024 || p > 65535 {
				return l, fmt.Errorf("%s=%q: want a port from 1024 to 65535", name, v)
			}
			*port = p
		}
	}
	abs, err := filepath.Abs(l.Dir)
	l.Dir = abs
	return l, err
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// Path is a path under the cluster's directory.
func (l Layout) Path(elem ...string) string {
	return filepath.Join(append([]string{l.Dir}, elem...)...)
}

// Kubeconfig is the administrator's kubeconfig, for the host (the API server through
// 127.0.0.1:APIPort).
func (l Layout) Kubeconfig() string { return l.Path("kubeconfig") }

// NodeKubeconfig is the administrator's kubeconfig for processes inside the node's network
// namespace (the API server at NodeIP).
func (l Layout) NodeKubeconfig() string { return l.Path("node", "admin.kubeconfig") }

// Registry is the registry's host:port, the same on the host and in the node.
func (l Layout) Registry() string { return "127.0.0.1:" + strconv.Itoa(l.RegistryPort) }

// CA is the cluster's CA certificate, which also signed the registry's certificate.
func (l Layout) CA() string { return l.Path("pki", "ca.crt") }

// CABundle is the system's roots plus the cluster's CA (SSL_CERT_FILE for tools that pull from
// the registry, such as operator-sdk).
func (l Layout) CABundle() string { return l.Path("pki", "ca-bundle.crt") }

// EnvFile is the sh-sourceable environment of the cluster.
func (l Layout) EnvFile() string { return l.Path("env") }

// HolderPID reads the PID of the process that keeps the control-plane node's namespaces open;
// it fails when no cluster was started.
func (l Layout) HolderPID() (int, error) { return l.pid(holderName(NodeName)) }

// pid reads the recorded PID of the daemon called name.
func (l Layout) pid(name string) (int, error) {
	data, err := os.ReadFile(l.Path("pids", name))
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(string(trimNewline(data)))
}

func trimNewline(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == ' ') {
		b = b[:len(b)-1]
	}
	return b
}
