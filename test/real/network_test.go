package realnode

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/cloudspace-dev/cloudspace-operator/test/framework"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/test/infra/realcluster"
)

// target is an address a probe tries to open a TCP connection to.
type target struct{ name, host string }

// checkTenantNetworks proves the workspaces' and VMs' NetworkPolicies on a cluster that
// enforces them: from Bob's IDEs, one on Alice's node and one on another, Alice's IDE (pod and
// Service), her VM's activity port, the API server, the workspace API and the metadata address
// are closed, while DNS, an address outside the cluster and her VM's guest port are open;
// Alice's gateway pod reaches her IDE. Then, with the workspaces and the VM paused and their
// policies deleted, the same probes open what was closed (each check can fail), and once the
// operator restores the policies they close again.
func checkTenantNetworks(t *testing.T) {
	nodes := strings.Fields(env["REAL_CLUSTER_NODES"])
	if len(nodes) < 3 {
		t.Fatalf("REAL_CLUSTER_NODES=%q: the isolation checks need two workers besides %s", env["REAL_CLUSTER_NODES"], realcluster.NodeName)
	}
	ensureNamespace(t, workspaceNS)
	gateway := newGatewayPod(t, "net-gateway", nodes[2])
	first := placedWorkspaces(t, nodes[1], [2]string{"net-alice", "alice"}, [2]string{"net-bob-near", "bob"})
	alice, near := first[0], first[1]
	far := placedWorkspaces(t, nodes[2], [2]string{"net-bob-far", "bob"})[0]
	waitRunning(t, gateway)
	aliceVM := tenantLauncher(t, "net-alice-vm")

	vmSSH := target{"alice-vm-ssh", net.JoinHostPort(aliceVM.Status.PodIP, "22")}
	vmActivity := target{"alice-vm-activity", net.JoinHostPort(aliceVM.Status.PodIP, vmActivityPort)}
	closedToBob := []target{
		{"alice-pod", net.JoinHostPort(alice.Status.PodIP, "8080")},
		{"alice-service", serviceAddr(t, workspaceNS, "net-alice")},
		{"api-server", net.JoinHostPort(realcluster.APIServiceIP, "443")},
		{"workspace-api", serviceAddr(t, operatorNS, grpcService)},
		{"metadata", net.JoinHostPort(realcluster.MetadataIP, "80")},
		vmSSH, vmActivity,
	}
	openToBob := []target{{"outside", net.JoinHostPort(realcluster.OutsideIP, "80")}}
	for _, from := range []*corev1.Pod{near, far} {
		probes := probe(t, from, append(closedToBob, openToBob...))
		expect(t, from, probes, openToBob, closedToBob)
	}
	// The gateway has no egress policy: what it reaches is up to the targets' own policies. A
	// VM's guest ports are open to all, as a Service's are (its SSH asks for her key); the
	// launcher's activity port is the operator's alone.
	toAlice := append(closedToBob[:2:2], vmSSH)
	fromGateway := append(toAlice, vmActivity)
	expect(t, gateway, probe(t, gateway, fromGateway), toAlice, []target{vmActivity})

	owners := []client.Object{&infrav1alpha1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: workspaceNS, Name: "net-alice-vm"}}}
	policies := []client.ObjectKey{{Namespace: workspaceNS, Name: "net-alice-vm-activity"}}
	for _, name := range []string{"net-alice", "net-bob-near", "net-bob-far"} {
		owners = append(owners, &infrav1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Namespace: workspaceNS, Name: name}})
		policies = append(policies, client.ObjectKey{Namespace: workspaceNS, Name: name})
	}
	withoutPolicies(t, owners, policies, func() {
		waitFor(t, time.Minute, "Bob reaching all of them from both nodes, the gateway the activity port, without the policies", func(context.Context) error {
			return errors.Join(expectErr(near, probe(t, near, closedToBob), closedToBob, nil), expectErr(far, probe(t, far, closedToBob), closedToBob, nil),
				expectErr(gateway, probe(t, gateway, fromGateway), fromGateway, nil))
		})
	})
	waitFor(t, time.Minute, "the restored policies closing them again", func(context.Context) error {
		return errors.Join(expectErr(near, probe(t, near, closedToBob), nil, closedToBob), expectErr(far, probe(t, far, closedToBob), nil, closedToBob),
			expectErr(gateway, probe(t, gateway, fromGateway), toAlice, []target{vmActivity}))
	})
}

// vmActivityPort is the port a VM's launcher serves its activity on (controllers: 9922 when
// no guest port takes it).
const vmActivityPort = "9922"

// tenantLauncher creates a VM in the workspaces' namespace whose guest need not boot: its
// launcher listens on the activity port, and QEMU on the guest's SSH port, as soon as they
// start. It returns the launcher pod once the guest's port accepts connections from the
// control-plane node (the activity port is the operator's alone: the node is refused).
func tenantLauncher(t *testing.T, name string) *corev1.Pod {
	t.Helper()
	vm := &infrav1alpha1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: workspaceNS, Name: name},
		Spec: infrav1alpha1.VirtualMachineSpec{Memory: ptr.To(resource.MustParse("512Mi")),
			Disk:        infrav1alpha1.VMDisk{VMVolume: infrav1alpha1.VMVolume{Size: ptr.To(resource.MustParse("1Gi"))}},
			IdleTimeout: &metav1.Duration{Duration: 10 * time.Minute}}}
	if err := k8sClient.Create(context.Background(), vm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), vm) })
	pod := &corev1.Pod{}
	waitFor(t, 2*time.Minute, "VM "+name+"'s launcher listening", func(ctx context.Context) error {
		if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: workspaceNS, Name: name + "-launcher"}, pod); err != nil {
			return err
		}
		if pod.Status.PodIP == "" || pod.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("pod %s, phase %s", pod.Status.PodIP, pod.Status.Phase)
		}
		conn, err := node.DialContext(ctx, "tcp", net.JoinHostPort(pod.Status.PodIP, "22"))
		if err != nil {
			return err
		}
		return conn.Close()
	})
	return pod
}

// placedWorkspaces creates small workspaces (name and owner each) whose pods run on node (the
// others are cordoned until they are scheduled; "" places them where the scheduler likes) and
// returns their Running IDE pods.
func placedWorkspaces(t *testing.T, node string, specs ...[2]string) []*corev1.Pod {
	t.Helper()
	if node != "" {
		uncordon := cordonAllBut(t, node)
		defer uncordon()
	}
	var workspaces []*infrav1alpha1.Workspace
	for _, s := range specs {
		ws := &infrav1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Namespace: workspaceNS, Name: s[0]},
			Spec: infrav1alpha1.WorkspaceSpec{Owner: s[1], Storage: infrav1alpha1.WorkspaceStorage{Size: ptr.To(resource.MustParse("1Gi"))},
				Resources: infrav1alpha1.WorkspaceResources{CPU: ptr.To(resource.MustParse("250m")), Memory: ptr.To(resource.MustParse("512Mi"))}}}
		if err := k8sClient.Create(context.Background(), ws); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), ws) })
		workspaces = append(workspaces, ws)
	}
	var pods []*corev1.Pod
	for _, ws := range workspaces {
		pod := runningIDE(t, ws)
		if node != "" && pod.Spec.NodeName != node {
			t.Fatalf("workspace %s runs on %s, want %s", ws.Name, pod.Spec.NodeName, node)
		}
		pods = append(pods, pod)
	}
	return pods
}

// runningIDE waits until the workspace is Running with one Ready IDE pod, and returns it.
func runningIDE(t *testing.T, ws *infrav1alpha1.Workspace) *corev1.Pod {
	t.Helper()
	var pod corev1.Pod
	waitFor(t, 3*time.Minute, "workspace "+ws.Name+" Running", func(ctx context.Context) error {
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(ws), ws); err != nil {
			return err
		}
		pods := &corev1.PodList{}
		if err := k8sClient.List(ctx, pods, client.InNamespace(ws.Namespace), client.MatchingLabels{"app.kubernetes.io/instance": ws.Name}); err != nil {
			return err
		}
		if ws.Status.Phase != infrav1alpha1.WorkspaceRunning || len(pods.Items) != 1 || !podReady(&pods.Items[0]) {
			return fmt.Errorf("phase %s (%s), pods %v", ws.Status.Phase, ws.Status.Message, podStates(pods.Items))
		}
		pod = pods.Items[0]
		return nil
	})
	return &pod
}

// cordonAllBut marks every node but one unschedulable; the returned function undoes it (and
// runs at the test's end in any case).
func cordonAllBut(t *testing.T, keep string) func() {
	t.Helper()
	var others []string
	for _, node := range strings.Fields(env["REAL_CLUSTER_NODES"]) {
		if node != keep {
			others = append(others, node)
		}
	}
	return cordon(t, others...)
}

// cordon marks the nodes unschedulable; the returned function undoes it (and runs at the
// test's end in any case).
func cordon(t *testing.T, nodes ...string) func() {
	t.Helper()
	set := func(node string, unschedulable bool) {
		patchNode(t, node, `{"spec":{"unschedulable":`+strconv.FormatBool(unschedulable)+`}}`)
	}
	for _, node := range nodes {
		set(node, true)
	}
	done := false
	undo := func() {
		if !done {
			done = true
			for _, node := range nodes {
				set(node, false)
			}
		}
	}
	t.Cleanup(undo)
	return undo
}

// newGatewayPod creates a pod labelled as the gateway's pods are, in the workspaces'
// namespace, on node ("" where the scheduler likes); waitRunning waits for it.
func newGatewayPod(t *testing.T, name, node string) *corev1.Pod {
	t.Helper()
	return newProbePod(t, workspaceNS, name, map[string]string{"infra.cloudspace.dev/workspace-access": "true"}, node)
}

// newProbePod creates a pod from the IDE image (which has bash for the probes) in ns, with
// labels, on node ("" where the scheduler likes); it is deleted when the test ends.
func newProbePod(t *testing.T, ns, name string, labels map[string]string, node string) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: corev1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: ptr.To[int64](0),
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](1000),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{Name: "probe", Image: ref(t, "cloudspace/workspace-ide:4.96.4"), Command: []string{"sleep", "3600"},
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}}}}}
	if err := k8sClient.Create(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), pod) })
	return pod
}

// waitRunning waits until every pod runs, reading each into its pointer.
func waitRunning(t *testing.T, pods ...*corev1.Pod) {
	t.Helper()
	for _, pod := range pods {
		waitFor(t, 2*time.Minute, "pod "+pod.Namespace+"/"+pod.Name+" Running", func(ctx context.Context) error {
			if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
				return err
			}
			if pod.Status.Phase != corev1.PodRunning {
				return fmt.Errorf("phase %s", pod.Status.Phase)
			}
			return nil
		})
	}
}

// checkAPIPolicy applies the workspace API's NetworkPolicy as config/default ships it to the
// OLM-installed operator: a pod in a namespace labelled for the API reaches the API's port, one
// in any other namespace does not (but reaches the metrics port, which authenticates every
// scrape); with the policy deleted, the outsider reaches the API too.
func checkAPIPolicy(t *testing.T) {
	ctx := context.Background()
	np := &networkingv1.NetworkPolicy{}
	data, err := os.ReadFile(filepath.Join(framework.RepoRoot(), "config", "default", "grpc_networkpolicy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, np); err != nil {
		t.Fatal(err)
	}
	np.Namespace, np.Name = operatorNS, "cloudspace-operator-"+np.Name // config/default's namespace and prefix
	if err := k8sClient.Create(ctx, np); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), np) })
	for ns, labelled := range map[string]bool{"api-portal": true, "api-outsider": false} {
		ensureNamespace(t, ns)
		t.Cleanup(func() {
			_ = k8sClient.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		})
		if labelled {
			patch := []byte(`{"metadata":{"labels":{"infra.cloudspace.dev/api-access":"true"}}}`)
			if err := k8sClient.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, client.RawPatch("application/merge-patch+json", patch)); err != nil {
				t.Fatal(err)
			}
		}
	}
	api := target{"workspace-api", serviceAddr(t, operatorNS, grpcService)}
	metrics := target{"metrics", serviceAddr(t, operatorNS, "cloudspace-operator-controller-manager-metrics-service")}
	portal, outsider := newProbePod(t, "api-portal", "client", nil, ""), newProbePod(t, "api-outsider", "client", nil, "")
	waitRunning(t, portal, outsider)
	waitFor(t, time.Minute, "the labelled namespace reaching the API, the other only its metrics", func(context.Context) error {
		if err := expectErr(portal, probe(t, portal, []target{api}), []target{api}, nil); err != nil {
			return err
		}
		return expectErr(outsider, probe(t, outsider, []target{api, metrics}), []target{metrics}, []target{api})
	})
	if err := k8sClient.Delete(ctx, np); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "the outsider reaching the API without the policy", func(context.Context) error {
		return expectErr(outsider, probe(t, outsider, []target{api}), []target{api}, nil)
	})
}

// probe tries every target at once from the pod's first container, and a DNS lookup of the
// kubernetes Service ("dns"); it returns which were open.
func probe(t *testing.T, pod *corev1.Pod, targets []target) map[string]bool {
	t.Helper()
	script := probeScript(targets, 3, "getent hosts kubernetes.default.svc.cluster.local >/dev/null")
	out := execIn(t, pod.Namespace, "pod/"+pod.Name, pod.Spec.Containers[0].Name, "bash", script)
	return probeAnswers(t, pod.Name, targets, out)
}

// probeScript is the bash script of a probe: a line "NAME open" or "NAME closed" per target,
// each connection given seconds, and for DNS, whether dns (a command) succeeds within twice
// that.
func probeScript(targets []target, seconds int, dns string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `p() { if timeout %d bash -c "exec 3<>/dev/tcp/$2/$3" 2>/dev/null; then echo "$1 open"; else echo "$1 closed"; fi; }`+"\n", seconds)
	for _, tg := range targets {
		host, port, _ := net.SplitHostPort(tg.host)
		fmt.Fprintf(&b, "p %s %s %s &\n", tg.name, host, port)
	}
	fmt.Fprintf(&b, "if timeout %d %s; then echo 'dns open'; else echo 'dns closed'; fi &\nwait\n", 2*seconds, dns)
	return b.String()
}

// probeAnswers reads a probe's output from where.
func probeAnswers(t *testing.T, where string, targets []target, out string) map[string]bool {
	t.Helper()
	open := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		name, state, _ := strings.Cut(line, " ")
		open[name] = state == "open"
	}
	// Every probe must have answered: a missing line is no proof of a closed port.
	if len(open) != len(targets)+1 {
		t.Fatalf("from %s: %d answers for %d probes and DNS:\n%s", where, len(open), len(targets), out)
	}
	return open
}

// expect fails the test unless exactly the open targets (and DNS) were open and the closed
// ones closed.
func expect(t *testing.T, from *corev1.Pod, got map[string]bool, open, closed []target) {
	t.Helper()
	if err := expectErr(from, got, open, closed); err != nil {
		t.Error(err)
		return
	}
	t.Logf("from %s on %s: %s", from.Name, from.Spec.NodeName, summary(got))
}

func expectErr(from *corev1.Pod, got map[string]bool, open, closed []target) error {
	var wrong []string
	if !got["dns"] {
		wrong = append(wrong, "DNS closed")
	}
	for _, tg := range open {
		if !got[tg.name] {
			wrong = append(wrong, tg.name+" ("+tg.host+") closed")
		}
	}
	for _, tg := range closed {
		if got[tg.name] {
			wrong = append(wrong, tg.name+" ("+tg.host+") open")
		}
	}
	if len(wrong) > 0 {
		return fmt.Errorf("from %s on %s: %s (all: %s)", from.Name, from.Spec.NodeName, strings.Join(wrong, ", "), summary(got))
	}
	return nil
}

func summary(got map[string]bool) string {
	var parts []string
	for name, open := range got {
		parts = append(parts, fmt.Sprintf("%s=%v", name, map[bool]string{true: "open", false: "closed"}[open]))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

// withoutPolicies pauses owners (Workspaces, VirtualMachines), deletes the NetworkPolicies
// named, runs fn, and resumes them, after which the operator writes the policies again.
func withoutPolicies(t *testing.T, owners []client.Object, policies []client.ObjectKey, fn func()) {
	t.Helper()
	ctx := context.Background()
	annotate := func(value *string) {
		for _, o := range owners {
			patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, infrav1alpha1.PauseAnnotation)
			if value != nil {
				patch = fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, infrav1alpha1.PauseAnnotation, *value)
			}
			if err := k8sClient.Patch(ctx, o, client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
				t.Fatal(err)
			}
		}
	}
	annotate(ptr.To("true"))
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			annotate(nil)
		}
	}
	t.Cleanup(resume)
	waitFor(t, time.Minute, "reconciliation paused", func(ctx context.Context) error {
		for _, o := range owners {
			if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
				return err
			}
			_, _, conds := statusOf(o)
			if c := meta.FindStatusCondition(conds, infrav1alpha1.ConditionReady); c == nil || c.Reason != infrav1alpha1.ReasonPaused {
				return fmt.Errorf("%s: conditions %v", o.GetName(), conds)
			}
		}
		return nil
	})
	for _, key := range policies {
		if err := k8sClient.Delete(ctx, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}); err != nil {
			t.Fatal(err)
		}
	}
	fn()
	resume()
	waitFor(t, time.Minute, "the operator writing the policies again", func(ctx context.Context) error {
		for _, key := range policies {
			if err := k8sClient.Get(ctx, key, &networkingv1.NetworkPolicy{}); err != nil {
				return err
			}
		}
		return nil
	})
}

// statusOf is the phase, message and conditions of a Workspace or VirtualMachine.
func statusOf(o client.Object) (phase, message string, conditions []metav1.Condition) {
	switch o := o.(type) {
	case *infrav1alpha1.Workspace:
		return string(o.Status.Phase), o.Status.Message, o.Status.Conditions
	case *infrav1alpha1.VirtualMachine:
		return string(o.Status.Phase), o.Status.Message, o.Status.Conditions
	}
	panic(fmt.Sprintf("the status of a %T", o))
}
