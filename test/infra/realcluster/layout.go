// Package realcluster runs a Kubernetes cluster with one real node on this machine (make
// real-cluster): etcd, kube-apiserver, kube-controller-manager, kube-scheduler, containerd,
// kubelet and kube-proxy built from source, a registry, cluster DNS, a volume provisioner and
// OLM. Everything but a port forwarder runs inside one private network namespace and one private
// mount namespace, held open by a holder process, so that nothing on the host changes: no
// sysctl, iptables rule, route or mount. The only host objects it makes are its own directory,
// the kubelet's cgroups (removed by Down) and two listeners on 127.0.0.1 (the API server and the
// registry, forwarded into the namespace).
package realcluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// The node's network, inside the private network namespace.
const (
	// NodeName is the node's name.
	NodeName = "real-node"
	// Bridge carries the node's address; pods are attached to it by the CNI bridge plugin.
	Bridge = "cs0"
	// NodeIP is the node's address and the gateway of its pods.
	NodeIP = "10.222.0.1"
	// PodSubnet holds the node's pods (from .10).
	PodSubnet = "10.222.0.0/24"
	// ServiceCIDR holds ClusterIPs; the API server's is the first.
	ServiceCIDR = "10.96.0.0/16"
	// APIServiceIP is the kubernetes Service's ClusterIP.
	APIServiceIP = "10.96.0.1"
	// APIPort is kube-apiserver's port on NodeIP.
	APIPort = 6443
	// ClusterDomain is the cluster's DNS domain, served by CoreDNS on NodeIP:53.
	ClusterDomain = "cluster.local"
	// CgroupRoot is the kubelet's cgroup root in every cgroup v1 hierarchy.
	CgroupRoot = "/cloudspace-real"
	// NodeLabels mark the node as GenericDaemon tests expect (logs=true, as dev-node-1 on KWOK).
	NodeLabels = "logs=true,cloudspace.dev/pool=general"
)

// Layout is where a cluster keeps its state, and the host ports it is reached on.
type Layout struct {
	// Dir holds everything the cluster makes on the host.
	Dir string
	// Bin holds the binaries (the repository's bin/).
	Bin string
	// APIPort is the API server's port on the host's 127.0.0.1.
	APIPort int
	// RegistryPort is the registry's port on 127.0.0.1, the same on the host and in the node:
	// an image is named 127.0.0.1:RegistryPort/... on both sides.
	RegistryPort int
}

// DefaultLayout is the layout of make real-cluster: REAL_CLUSTER_DIR (default
// <repo>/.real-cluster), REAL_CLUSTER_API_PORT (16443) and REAL_CLUSTER_REGISTRY_PORT (15000).
func DefaultLayout(repo string) (Layout, error) {
	l := Layout{
		Dir:          envOr("REAL_CLUSTER_DIR", filepath.Join(repo, ".real-cluster")),
		Bin:          filepath.Join(repo, "bin"),
		APIPort:      16443,
		RegistryPort: 15000,
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

// HolderPIDFile holds the PID of the process that keeps the node's namespaces open.
func (l Layout) HolderPIDFile() string { return l.Path("pids", "holder") }

// HolderPID reads the holder's PID; it fails when no cluster was started.
func (l Layout) HolderPID() (int, error) {
	data, err := os.ReadFile(l.HolderPIDFile())
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
