package realcluster

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// Options are what Up needs beyond the layout.
type Options struct {
	// Self is this program (it serves as the holder, the forwarder and the provisioner).
	Self string
	// Log receives each step with its elapsed time.
	Log func(format string, args ...any)
	// Alongside, when set, is what needs the API server and the registry but not the nodes (the
	// infra images, CoreDNS's Deployment, OLM's processes). Up runs it once: as soon as the API
	// server is ready, while the nodes start, or at once when the cluster runs already; Up
	// returns its error.
	Alongside func(ctx context.Context) error
}

// Up starts the cluster unless it runs already, and waits until its nodes are Ready with their
// NetworkPolicy enforcers running. A cluster left half-started or stopped (a reboot, a killed
// session) is removed and made anew.
func (l Layout) Up(ctx context.Context, o Options) error {
	start := time.Now()
	step := func(format string, args ...any) {
		o.Log("%5.1fs "+format, append([]any{time.Since(start).Seconds()}, args...)...)
	}
	if l.healthy(ctx) {
		step("already running (KUBECONFIG=%s)", l.Kubeconfig())
		return o.alongside(ctx)
	}
	if _, err := os.Stat(l.Dir); err == nil {
		step("removing a cluster that is not running")
	}
	if err := l.Down(o.Log); err != nil {
		return err
	}
	if err := l.prepare(); err != nil {
		return err
	}
	step("certificates and configuration written to %s", l.Dir)
	if err := l.startNamespaces(o.Self); err != nil {
		return err
	}
	step("namespaces made: the fabric and %d nodes", len(l.Nodes()))
	if err := l.startDaemons(ctx, o, step); err != nil {
		return fmt.Errorf("%w (logs in %s)", err, l.Path("logs"))
	}
	if err := l.writeEnv(); err != nil {
		return err
	}
	step("%d nodes Ready; export KUBECONFIG=%s (or . %s)", len(l.Nodes()), l.Kubeconfig(), l.EnvFile())
	return nil
}

// prepare writes the cluster's files and creates the kubelets' cgroups.
func (l Layout) prepare() error {
	for _, d := range []string{"state/registry", "state/volumes", "state/home", "logs", "pids", "node/serviceaccount"} {
		if err := os.MkdirAll(l.Path(d), 0o755); err != nil {
			return err
		}
	}
	if err := l.writePKI(); err != nil {
		return fmt.Errorf("writing certificates: %w", err)
	}
	if err := l.writeKubeconfigs(); err != nil {
		return err
	}
	if err := l.writeNodeFiles(); err != nil {
		return err
	}
	if err := makeCgroups(CgroupRoot); err != nil {
		return err
	}
	for _, n := range l.Nodes() {
		if err := l.prepareNode(n); err != nil {
			return fmt.Errorf("preparing node %s: %w", n.Name, err)
		}
	}
	return nil
}

// prepareNode makes the node's state directories, certificates, configuration and cgroups.
func (l Layout) prepareNode(n Node) error {
	for _, d := range []string{"var-lib", "var-log"} {
		if err := os.MkdirAll(l.statePath(n, d), 0o755); err != nil {
			return err
		}
	}
	if err := l.issueNodeCerts(n); err != nil {
		return err
	}
	if err := l.writeNodeConfig(n); err != nil {
		return err
	}
	return makeCgroups(n.cgroupRoot())
}

// startDaemons starts each phase of daemons and waits for what the next phase needs; once the
// API server is ready, o.Alongside runs beside the rest.
func (l Layout) startDaemons(ctx context.Context, o Options, step func(string, ...any)) error {
	cp, err := l.HolderPID()
	if err != nil {
		return err
	}
	phases := l.daemons(o.Self, cp)
	waits := []func(context.Context) error{
		func(ctx context.Context) error {
			return l.waitHTTP(ctx, cp, "http://127.0.0.1:2379/health", "etcd")
		},
		l.waitAPIServer,
		l.waitNodesReady,
		l.waitEnforcers,
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	alongside := make(chan error, 1)
	for i, phase := range phases {
		for _, d := range phase {
			if err := l.start(d); err != nil {
				return err
			}
		}
		if err := waits[i](ctx); err != nil {
			return err
		}
		step("%s", phaseNames[i])
		if i == apiPhase {
			go func() { alongside <- o.alongside(ctx) }()
		}
	}
	if err := l.bootstrap(ctx); err != nil {
		return err
	}
	return <-alongside
}

// apiPhase is the phase after which the API server is ready.
const apiPhase = 1

// alongside runs Alongside, if any.
func (o Options) alongside(ctx context.Context) error {
	if o.Alongside == nil {
		return nil
	}
	return o.Alongside(ctx)
}

var phaseNames = []string{"etcd, registry and containerd started", "API server ready",
	"kubelets, kube-proxies, controllers and the provisioner started; nodes Ready", "NetworkPolicy enforcers running"}

// holders are the names of the holders of the fabric's and every node's namespaces.
func (l Layout) holders() []string {
	names := []string{holderName(fabric)}
	for _, n := range l.Nodes() {
		names = append(names, holderName(n.Name))
	}
	return names
}

// processNames are the names of the holders and of every daemon Up starts, in order.
func (l Layout) processNames() []string {
	names := l.holders()
	for _, phase := range l.daemons("", 0) {
		for _, d := range phase {
			names = append(names, d.name)
		}
	}
	return names
}

// healthy tells whether a cluster runs here: every daemon alive and the API server ready.
func (l Layout) healthy(ctx context.Context) bool {
	running := l.running()
	for _, name := range l.processNames() {
		if _, ok := running[name]; !ok {
			return false
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return l.waitAPIServer(ctx) == nil
}

// waitHTTP waits until url, inside the node's network namespace, answers 200.
func (l Layout) waitHTTP(ctx context.Context, holder int, url, what string) error {
	return waitOK(ctx, &http.Transport{DialContext: Dialer{PID: holder}.DialContext}, url, what)
}

// WaitRegistry waits until the registry answers its API's base path (through the host's
// forwarder, as pushes reach it) over transport.
func (l Layout) WaitRegistry(ctx context.Context, transport http.RoundTripper) error {
	return waitOK(ctx, transport, "https://"+l.Registry()+"/v2/", "the registry at "+l.Registry())
}

// waitOK waits until a GET of url over transport answers 200.
func waitOK(ctx context.Context, transport http.RoundTripper, url, what string) error {
	client := &http.Client{Transport: transport, Timeout: 2 * time.Second}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("%s did not become healthy: %w", what, err)
	}
	return nil
}

func (l Layout) clientset() (*kubernetes.Clientset, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", l.Kubeconfig())
	if err != nil {
		return nil, err
	}
	cfg.Timeout = 5 * time.Second
	return kubernetes.NewForConfig(cfg)
}

func (l Layout) waitAPIServer(ctx context.Context) error {
	cs, err := l.clientset()
	if err != nil {
		return err
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		body, err := cs.RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil && string(body) == "ok", nil
	})
	if err != nil {
		return fmt.Errorf("the API server did not become ready: %w", err)
	}
	return nil
}

func (l Layout) waitNodesReady(ctx context.Context) error {
	for _, n := range l.Nodes() {
		if err := l.waitNodeReady(ctx, n); err != nil {
			return err
		}
	}
	return nil
}

func (l Layout) waitNodeReady(ctx context.Context, n Node) error {
	cs, err := l.clientset()
	if err != nil {
		return err
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		node, err := cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		return err == nil && nodeReady(node), nil
	})
	if err != nil {
		return fmt.Errorf("node %s did not become Ready: %w", n.Name, err)
	}
	return nil
}

// nodeReady reports whether the node's Ready condition is True.
func nodeReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// writeEnv writes the sh-sourceable environment: the kubeconfig, the registry, its CA bundle
// (for tools that pull from it), the image a GenericDaemon can run once make images pushed it,
// the control-plane node's holder's PID (tests reach the node's network through it) and the
// nodes' names.
func (l Layout) writeEnv() error {
	holder, err := l.HolderPID()
	if err != nil {
		return err
	}
	env := fmt.Sprintf(`export KUBECONFIG=%q
export REGISTRY=%q
export SSL_CERT_FILE=%q
export GD_TEST_IMAGE=%q
export REAL_CLUSTER_DIR=%q
export REAL_CLUSTER_HOLDER=%d
export REAL_CLUSTER_NODES=%q
`, l.Kubeconfig(), l.Registry(), l.CABundle(), l.Registry()+"/"+TestDaemonImage, l.Dir, holder, strings.Join(l.nodeNames(), " "))
	return os.WriteFile(l.EnvFile(), []byte(env), 0o644)
}

func (l Layout) nodeNames() []string {
	var names []string
	for _, n := range l.Nodes() {
		names = append(names, n.Name)
	}
	return names
}

// TestDaemonImage is the image GenericDaemon tests run (make images pushes it).
const TestDaemonImage = "cloudspace/test-daemon:v0.1.0"

// Down stops every process of the cluster, its pods' too, removes its cgroups and its
// directory, and checks that nothing of it is left mounted. Without a directory there is no
// cluster to stop, only empty cgroups a killed one may have left.
func (l Layout) Down(log func(string, ...any)) error {
	if _, err := os.Stat(l.Dir); errors.Is(err, os.ErrNotExist) {
		return removeLeftCgroups(CgroupRoot, log)
	}
	start := time.Now()
	running := l.running()
	// The kubelets first, so that they restart nothing; then the pods' processes, then OLM,
	// then everything else in reverse order of start, then what is left in each node's mount
	// namespace (containerd's shims), then the holders. What runs is read from pids/, so a
	// cluster started with another number of workers is stopped whole.
	for name, pid := range running {
		if name == "kubelet" || strings.HasPrefix(name, "kubelet-") {
			stop(pid, 10*time.Second)
			delete(running, name)
		}
	}
	for _, pid := range cgroupProcs(CgroupRoot) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	for _, name := range l.stopOrder() {
		if pid, ok := running[name]; ok {
			stop(pid, 10*time.Second)
			delete(running, name)
		}
	}
	var holders []int
	for name, pid := range running {
		switch {
		case name == holderName(fabric):
			holders = append(holders, pid)
		case name == "holder" || strings.HasPrefix(name, "holder-"):
			// Only a node's holder has a mount namespace of its own: the fabric's shares the
			// host's.
			for _, p := range inNamespace(pid) {
				stop(p, 5*time.Second)
			}
			holders = append(holders, pid)
		default:
			stop(pid, 5*time.Second) // a daemon of a node this layout does not name
		}
	}
	for _, pid := range holders {
		stop(pid, 5*time.Second)
	}
	var errs []error
	if err := waitCgroupsEmpty(); err != nil {
		errs = append(errs, err)
	}
	if _, err := removeCgroups(CgroupRoot); err != nil {
		errs = append(errs, err)
	}
	if mounts := mountsUnder(l.Dir); len(mounts) > 0 {
		errs = append(errs, fmt.Errorf("still mounted on the host, left in place: %s", strings.Join(mounts, ", ")))
	} else if err := os.RemoveAll(l.Dir); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	log("%5.1fs cluster removed: processes stopped, cgroups and %s removed", time.Since(start).Seconds(), l.Dir)
	return nil
}

// stopOrder is the daemons' names, OLM's first, then the others in reverse order of start.
func (l Layout) stopOrder() []string {
	var names []string
	for _, d := range l.olmDaemons(OLM{}) {
		names = append(names, d.name)
	}
	phases := l.daemons("", 0)
	for i := len(phases) - 1; i >= 0; i-- {
		for j := len(phases[i]) - 1; j >= 0; j-- {
			names = append(names, phases[i][j].name)
		}
	}
	return names
}

// waitCgroupsEmpty waits until the killed pods' processes have left their cgroups.
func waitCgroupsEmpty() error {
	return wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return len(cgroupProcs(CgroupRoot)) == 0, nil
	})
}

// mountsUnder lists the host's mount points under dir.
func mountsUnder(dir string) []string {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) > 4 && (fields[4] == dir || strings.HasPrefix(fields[4], dir+string(filepath.Separator))) {
			out = append(out, fields[4])
		}
	}
	return out
}
