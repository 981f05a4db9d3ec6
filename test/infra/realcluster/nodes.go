package realcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
	if err := nsRun(fab, false, fabricSetup); err != nil {
		return fmt.Errorf("preparing the fabric: %w", err)
	}
	for _, n := range l.Nodes() {
		if err := l.startNodeNamespaces(self, n, fab); err != nil {
			return err
		}
	}
	return nil
}

// startNodeNamespaces starts the node's holder, prepares its namespaces (nodeSetup) and joins
// it to the fabric, which routes the node's pod subnet to it.
func (l Layout) startNodeNamespaces(self string, n Node, fab int) error {
	holder, err := l.startHolder(self, n.Name, true)
	if err != nil {
		return err
	}
	if err := nsRun(holder, true, l.nodeSetup(n, fab)); err != nil {
		return fmt.Errorf("preparing node %s: %w", n.Name, err)
	}
	join := fmt.Sprintf("set -e\nip link set %[1]s master %[2]s\nip link set %[1]s up\nip route add %[3]s via %[4]s\n",
		n.fabricPort(), FabricBridge, n.Subnet(), n.fabricIP())
	if err := nsRun(fab, false, join); err != nil {
		return fmt.Errorf("joining node %s to the fabric: %w", n.Name, err)
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
	// Ready once unshare has exec'd this program: its namespaces (and the private mount
	// propagation) are all in place only then, not while the arguments merely name "hold".
	err = wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", holder))
		exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", holder))
		return err == nil && ns != own && exe == self, nil
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

// fabricSetup prepares the fabric's namespace: the bridge the nodes join (each adds the route
// to its pods, startNodeNamespaces), forwarding, and the two outside addresses the fabric
// serves (Outside). This kernel has no dummy interfaces: they live on the loopback.
var fabricSetup = strings.Join([]string{"set -e", "ip link set lo up",
	"ip link add " + FabricBridge + " type bridge",
	"ip addr add " + FabricGateway + "/24 dev " + FabricBridge,
	"ip link set " + FabricBridge + " up",
	"ip addr add " + OutsideIP + "/32 dev lo",
	"ip addr add " + MetadataIP + "/32 dev lo",
	"echo 1 > /proc/sys/net/ipv4/ip_forward", ""}, "\n")

// nodeSetup prepares a node's namespaces, run in them once its holder made them: a private
// /run, /var/lib and /var/log (containerd's, the kubelet's and CNI's fixed paths, the pods'
// logs), the node's resolv.conf, a service account directory, the three kernel settings the
// kubelet insists on answered from files, and the network: loopback, the bridge with the
// node's address, its end of the fabric (the peer made in the fabric's namespace) and the
// default route through the fabric, which routes to every other node's pods and the outside
// (without a route no ClusterIP is reachable either), forwarding on (the namespace's own
// setting).
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
	w("ip route add default via %s", FabricGateway)
	w("echo 1 > /proc/sys/net/ipv4/ip_forward")
	return b.String()
}

// NodeNamed is the node of that name, whatever number of workers the layout says.
func NodeNamed(name string) (Node, error) {
	if name == NodeName {
		return Node{Name: name}, nil
	}
	if i, err := strconv.Atoi(strings.TrimPrefix(name, WorkerPrefix)); err == nil && strings.HasPrefix(name, WorkerPrefix) && i > 0 && i <= MaxWorkers {
		return Node{Name: name, Index: i}, nil
	}
	return Node{}, fmt.Errorf("no node is called %q (%s, %s1...)", name, NodeName, WorkerPrefix)
}

// nodeRuntime are the daemons a lost node loses: its kubelet and its container runtime.
// Killing them leaves its pods' processes running (containerd's shims hold them), reported by
// nobody, as when a node's agent dies or its link is cut.
var nodeRuntime = []string{"kubelet", "containerd"}

// StopNode kills the node's kubelet and containerd, so that the cluster loses the node.
func (l Layout) StopNode(name string) error {
	n, err := NodeNamed(name)
	if err != nil {
		return err
	}
	running := l.running()
	for _, base := range nodeRuntime {
		pid, ok := running[n.daemon(base)]
		if !ok {
			return fmt.Errorf("%s of node %s is not running", base, name)
		}
		stop(pid, 0)
	}
	return nil
}

// StartNode starts the node's containerd and kubelet again, those not running (as they were
// started with the cluster), and waits until the node is Ready. A kubelet that starts before containerd's CRI
// serves exits at once; it is started again, as systemd restarts a node's kubelet.
func (l Layout) StartNode(ctx context.Context, self, name string) error {
	n, err := NodeNamed(name)
	if err != nil {
		return err
	}
	cp, err := l.HolderPID()
	if err != nil {
		return err
	}
	containerd, ok1 := l.daemonNamed(self, cp, n.daemon("containerd"))
	kubelet, ok2 := l.daemonNamed(self, cp, n.daemon("kubelet"))
	if !ok1 || !ok2 {
		return fmt.Errorf("the cluster has no node %s", name)
	}
	if _, ok := l.running()[containerd.name]; !ok {
		if err := l.start(containerd); err != nil {
			return err
		}
	}
	return l.superviseKubelet(ctx, n, kubelet)
}

// superviseKubelet starts the node's kubelet, and again whenever it exits, until the node is
// Ready: a kubelet that starts before containerd's CRI serves exits at once, and systemd
// restarts a real node's.
func (l Layout) superviseKubelet(ctx context.Context, n Node, kubelet daemon) error {
	cs, err := l.clientset()
	if err != nil {
		return err
	}
	err = wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if _, ok := l.running()[kubelet.name]; !ok {
			if err := l.start(kubelet); err != nil {
				return false, err
			}
		}
		node, err := cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		return err == nil && nodeReady(node), nil
	})
	if err != nil {
		return fmt.Errorf("node %s did not become Ready: %w (logs in %s)", n.Name, err, l.Path("logs"))
	}
	return nil
}

// daemonNamed is the cluster's daemon of that name.
func (l Layout) daemonNamed(self string, cp int, name string) (daemon, bool) {
	for _, phase := range l.daemons(self, cp) {
		for _, d := range phase {
			if d.name == name {
				return d, true
			}
		}
	}
	return daemon{}, false
}

// AddNode joins a new worker to the running cluster, registered as reg says: its namespaces,
// certificates, containerd, kubelet, kube-proxy and enforcer, as Up makes a worker; it returns
// once the node is Ready with its enforcer running.
func (l Layout) AddNode(ctx context.Context, self, name string, reg Registration) error {
	n, err := NodeNamed(name)
	if err != nil {
		return err
	}
	if n.Index == 0 {
		return fmt.Errorf("%s is the control-plane node: only a worker can be added", name)
	}
	if _, ok := l.running()[holderName(n.Name)]; ok {
		return fmt.Errorf("node %s runs already", name)
	}
	cp, err := l.HolderPID()
	if err != nil {
		return err
	}
	fab, err := l.pid(holderName(fabric))
	if err != nil {
		return err
	}
	if err := l.prepareNode(n); err != nil {
		return err
	}
	if err := l.startNodeNamespaces(self, n, fab); err != nil {
		return err
	}
	phases := l.nodeDaemons(self, cp, n, reg)
	var kubelet daemon
	for _, d := range append(phases[0], phases[1]...) {
		if d.name == n.daemon("kubelet") {
			kubelet = d
		} else if err := l.start(d); err != nil {
			return err
		}
	}
	if err := l.superviseKubelet(ctx, n, kubelet); err != nil {
		return err
	}
	if err := l.start(phases[2][0]); err != nil {
		return err
	}
	return l.waitEnforcer(ctx, n)
}

// RemoveNode takes a worker out of the cluster for good: its processes and its pods' stopped,
// its Node deleted, its fabric port, route, cgroups and files removed.
func (l Layout) RemoveNode(ctx context.Context, name string) error {
	n, err := NodeNamed(name)
	if err != nil {
		return err
	}
	if n.Index == 0 {
		return fmt.Errorf("%s is the control-plane node: only a worker can be removed", name)
	}
	running := l.running()
	if pid, ok := running[n.daemon("kubelet")]; ok {
		stop(pid, 10*time.Second)
		delete(running, n.daemon("kubelet"))
	}
	for _, pid := range cgroupProcs(n.cgroupRoot()) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	for name, pid := range running {
		if strings.HasSuffix(name, "-"+n.Name) && name != holderName(n.Name) {
			stop(pid, 10*time.Second)
		}
	}
	if holder, ok := running[holderName(n.Name)]; ok {
		for _, pid := range inNamespace(holder) {
			stop(pid, 5*time.Second)
		}
		stop(holder, 5*time.Second)
	}
	var errs []error
	if fab, err := l.pid(holderName(fabric)); err == nil {
		// The port goes with the node's namespace, but the kernel frees that later.
		errs = append(errs, nsRun(fab, false, fmt.Sprintf("ip link del %s 2>/dev/null || true\nip route del %s 2>/dev/null || true", n.fabricPort(), n.Subnet())))
	}
	cs, err := l.clientset()
	if err != nil {
		return err
	}
	if err := cs.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("deleting node %s: %w", n.Name, err))
	}
	errs = append(errs, wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return len(cgroupProcs(n.cgroupRoot())) == 0, nil
	}))
	if _, err := removeCgroups(n.cgroupRoot()); err != nil {
		errs = append(errs, err)
	}
	pids, _ := filepath.Glob(l.Path("pids", "*-"+n.Name))
	for _, p := range append(pids, l.statePath(n), l.nodePath(n)) {
		errs = append(errs, os.RemoveAll(p))
	}
	return errors.Join(errs...)
}
