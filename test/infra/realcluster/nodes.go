package realcluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Node is one node of the cluster: the control-plane node (index 0), which runs pods as well,
// or a worker.
type Node struct {
	Name  string
	Index int
}

// Nodes are the control-plane node and the layout's workers, in order.
func (l Layout) Nodes() []Node {
	nodes := []Node{{Name: NodeName}}
	for i := 1; i <= l.Workers; i++ {
		nodes = append(nodes, Node{Name: WorkerPrefix + strconv.Itoa(i), Index: i})
	}
	return nodes
}

// IP is the node's address (its InternalIP) on its bridge: the gateway of its pods.
func (n Node) IP() string { return fmt.Sprintf("10.222.%d.1", n.Index) }

// Subnet holds the node's pods.
func (n Node) Subnet() string { return fmt.Sprintf("10.222.%d.0/24", n.Index) }

// fabricIP is the node's end of the fabric.
func (n Node) fabricIP() string { return fmt.Sprintf("10.221.0.%d", n.Index+1) }

// fabricPort is the fabric's end of the node's veth pair.
func (n Node) fabricPort() string { return "node" + strconv.Itoa(n.Index) }

// daemon names one of the node's processes: the control-plane node's keep their plain names.
func (n Node) daemon(base string) string {
	if n.Index == 0 {
		return base
	}
	return base + "-" + n.Name
}

// fabric names the fabric's holder; a daemon whose node is fabric runs in its namespace.
const fabric = "fabric"

// holderName is the holder of the named node's (or the fabric's) namespaces.
func holderName(node string) string {
	if node == NodeName {
		return "holder"
	}
	return "holder-" + node
}

// nodePath is a path under the node's own configuration directory.
func (l Layout) nodePath(n Node, elem ...string) string {
	return l.Path(append([]string{"nodes", n.Name}, elem...)...)
}

// statePath is a path under the node's own state (its /var/lib and /var/log).
func (l Layout) statePath(n Node, elem ...string) string {
	return l.Path(append([]string{"state", n.Name}, elem...)...)
}

// cgroupRoot is the node's kubelet's cgroup root.
func (n Node) cgroupRoot() string { return CgroupRoot + "/" + n.Name }

// startNamespaces starts the fabric's holder and each node's, and joins them: every node's veth
// pair ends on the fabric's bridge.
func (l Layout) startNamespaces(self string) error {
	fab, err := l.startHolder(self, fabric, false)
	if err != nil {
		return err
	}
	if err := nsRun(fab, false, l.fabricSetup()); err != nil {
		return fmt.Errorf("preparing the fabric: %w", err)
	}
	for _, n := range l.Nodes() {
		holder, err := l.startHolder(self, n.Name, true)
		if err != nil {
			return err
		}
		if err := nsRun(holder, true, l.nodeSetup(n, fab)); err != nil {
			return fmt.Errorf("preparing node %s: %w", n.Name, err)
		}
		if err := nsRun(fab, false, fmt.Sprintf("set -e\nip link set %s master %s\nip link set %s up\n",
			n.fabricPort(), FabricBridge, n.fabricPort())); err != nil {
			return fmt.Errorf("joining node %s to the fabric: %w", n.Name, err)
		}
	}
	return nil
}

// startHolder starts the process that holds the named namespaces open: a network namespace,
// and with mount a private mount namespace too.
func (l Layout) startHolder(self, node string, mount bool) (int, error) {
	args := []string{"--net"}
	if mount {
		args = append(args, "--mount", "--propagation", "private")
	}
	name := holderName(node)
	if err := l.start(daemon{name: name, bin: "unshare", args: append(args, "--", self, "hold", l.Dir)}); err != nil {
		return 0, err
	}
	holder, err := l.pid(name)
	if err != nil {
		return 0, err
	}
	own, _ := os.Readlink("/proc/self/ns/net")
	err = wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", holder))
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", holder))
		return err == nil && ns != own && strings.Contains(string(cmdline), "hold"), nil
	})
	if err != nil {
		return 0, fmt.Errorf("%s did not make its namespaces: %w", name, err)
	}
	return holder, nil
}

// nsRun runs a shell script in the holder's network namespace (and its mount namespace).
func nsRun(holder int, mount bool, script string) error {
	args := []string{"--target", strconv.Itoa(holder), "--net"}
	if mount {
		args = append(args, "--mount")
	}
	out, err := exec.Command("nsenter", append(args, "--", "sh", "-c", script)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%w\n%s", err, out)
	}
	return nil
}

// fabricSetup prepares the fabric's namespace: the bridge the nodes join, a route to each node's
// pods, forwarding, and the two outside addresses the fabric serves (outsideServer).
func (l Layout) fabricSetup() string {
	var b strings.Builder
	w := func(format string, args ...any) { b.WriteString(fmt.Sprintf(format, args...) + "\n") }
	w("set -e")
	w("ip link set lo up")
	w("ip link add %s type bridge", FabricBridge)
	w("ip addr add %s/24 dev %s", FabricGateway, FabricBridge)
	w("ip link set %s up", FabricBridge)
	// This kernel has no dummy interfaces: the outside addresses live on the loopback.
	w("ip addr add %s/32 dev lo", OutsideIP)
	w("ip addr add %s/32 dev lo", MetadataIP)
	for _, n := range l.Nodes() {
		w("ip route add %s via %s", n.Subnet(), n.fabricIP())
	}
	w("echo 1 > /proc/sys/net/ipv4/ip_forward")
	return b.String()
}

// nodeSetup prepares a node's namespaces, run in them once its holder made them: a private
// /run, /var/lib and /var/log (containerd's, the kubelet's and CNI's fixed paths, the pods'
// logs), the node's resolv.conf, a service account directory, the three kernel settings the
// kubelet insists on answered from files, and the network: loopback, the bridge with the
// node's address, its end of the fabric (the peer made in the fabric's namespace), a route to
// every other node's pods and the default route through the fabric (without a route no
// ClusterIP is reachable), forwarding on (the namespace's own setting).
func (l Layout) nodeSetup(n Node, fabricHolder int) string {
	var b strings.Builder
	w := func(format string, args ...any) { b.WriteString(fmt.Sprintf(format, args...) + "\n") }
	w("set -e")
	w("mount -t tmpfs -o mode=0755 cloudspace-run /run")
	w("mkdir -p /run/containerd")
	w("mount --bind %q /var/lib", l.statePath(n, "var-lib"))
	w("mount --bind %q /var/log", l.statePath(n, "var-log"))
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
	w("ip addr add %s/24 dev %s", n.IP(), Bridge)
	w("ip link set %s up", Bridge)
	w("ip link add eth0 type veth peer name %s netns %d", n.fabricPort(), fabricHolder)
	w("ip addr add %s/24 dev eth0", n.fabricIP())
	w("ip link set eth0 up")
	for _, other := range l.Nodes() {
		if other != n {
			w("ip route add %s via %s", other.Subnet(), other.fabricIP())
		}
	}
	w("ip route add default via %s", FabricGateway)
	w("echo 1 > /proc/sys/net/ipv4/ip_forward")
	return b.String()
}
