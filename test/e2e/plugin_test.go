package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/plugin"
	"github.com/cloudspace-dev/cloudspace-operator/pkg/workspacev1"
	"github.com/cloudspace-dev/cloudspace-operator/test/framework"
)

// pluginCache is the plugin's discovery cache in this suite.
var pluginCache = filepath.Join(os.TempDir(), fmt.Sprintf("cloudspace-e2e-plugin-cache-%d", os.Getpid()))

// kubectlCloudspace runs the plugin binary against the suite's cluster and returns its
// standard output and exit code.
func kubectlCloudspace(t *testing.T, args ...string) ([]byte, int) {
	t.Helper()
	binary := os.Getenv("E2E_PLUGIN")
	if binary == "" {
		t.Fatal("E2E_PLUGIN is not set: run `make test-e2e`, which builds it")
	}
	// A discovery cache of the test's own: other clusters had this address before.
	cmd := exec.Command(binary, append([]string{"--kubeconfig", cluster.Kubeconfig, "--cache-dir", pluginCache}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		t.Logf("kubectl cloudspace %v: exit %d: %s", args, exit.ExitCode(), stderr.String())
		return out, exit.ExitCode()
	case err != nil:
		t.Fatalf("kubectl cloudspace %v: %v", args, err)
	}
	return out, 0
}

// wsArgs are the plugin's arguments for the ws command args, called as user of the suite's API.
func wsArgs(t *testing.T, user string, args ...string) []string {
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(tokens[user]+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return append([]string{"ws", "--api", grpcAddr, "--api-ca-file", grpcTLS.CA, "--api-token-file", tokenFile}, args...)
}

// pluginJSON runs the plugin with -o json and decodes its output into v.
func pluginJSON(t *testing.T, v any, args ...string) int {
	t.Helper()
	out, code := kubectlCloudspace(t, append(args, "-o", "json")...)
	if len(out) > 0 {
		if err := json.Unmarshal(out, v); err != nil {
			t.Fatalf("kubectl cloudspace %v -o json: %v\n%s", args, err, out)
		}
	}
	return code
}

// TestPluginKindsListsEveryServedKind: kinds finds the three shipped kinds (their category) and
// the pure chart kind Demo (its CRD's label), and counts a Ready Demo.
func TestPluginKindsListsEveryServedKind(t *testing.T) {
	ns := newTestNamespace(t)
	demo := newDemo(ns, "counted")
	if err := k8sClient.Create(context.Background(), demo); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "the Demo to be counted Ready", func(context.Context) error {
		var kinds []plugin.Kind
		if code := pluginJSON(t, &kinds, "kinds", "-n", ns); code != plugin.ExitOK {
			return fmt.Errorf("exit %d", code)
		}
		var names []string
		for _, k := range kinds {
			names = append(names, k.Kind)
			if k.Kind == "Demo" && (k.Total != 1 || k.Ready != 1) {
				return fmt.Errorf("Demo: %+v", k)
			}
		}
		for _, want := range []string{"GenericDaemon", "Workspace", "VirtualMachine", "Demo"} {
			if !slices.Contains(names, want) {
				return fmt.Errorf("kinds %v lack %s", names, want)
			}
		}
		return nil
	})
	if out, code := kubectlCloudspace(t, "kinds", "-A"); code != 0 || !bytes.Contains(out, []byte("KIND")) || !bytes.Contains(out, []byte("VirtualMachine")) {
		t.Errorf("kinds -A: exit %d\n%s", code, out)
	}
}

// TestPluginTreeShowsChildrenAndMissingOnes: tree shows every child of a GenericDaemon and of a
// Workspace with its readiness; a child deleted by hand is Missing until the operator puts it
// back (the resource is paused meanwhile, so that the test sees it missing).
func TestPluginTreeShowsChildrenAndMissingOnes(t *testing.T) {
	ctx := context.Background()
	ns := newTestNamespace(t)
	gd := &infrav1alpha1.GenericDaemon{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tree-gd"},
		Spec: infrav1alpha1.GenericDaemonSpec{Image: "busybox:1.36", Label: "logs"}}
	ws := &infrav1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tree-ws"}, Spec: infrav1alpha1.WorkspaceSpec{Owner: "alice"}}
	for _, o := range []client.Object{gd, ws} {
		if err := k8sClient.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	wantChildren(t, "gd", gd.Name, ns, []string{"ServiceAccount", "DaemonSet"})
	wantChildren(t, "ws", ws.Name, ns, []string{"NetworkPolicy", "Secret", "PersistentVolumeClaim", "Service", "Deployment"})

	setPaused(t, gd, "true")
	if err := k8sClient.Delete(ctx, &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: gd.Name}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "tree to name the deleted DaemonSet Missing", func(context.Context) error {
		var root plugin.Node
		code := pluginJSON(t, &root, "tree", "genericdaemon", gd.Name, "-n", ns)
		if ds := childOf(root, "DaemonSet"); code != plugin.ExitNotReady || ds == nil || ds.Status != plugin.Missing || ds.Ready {
			return fmt.Errorf("exit %d, DaemonSet %+v", code, ds)
		}
		return nil
	})
	setPaused(t, gd, "false")
	wantChildren(t, "gd", gd.Name, ns, []string{"ServiceAccount", "DaemonSet"})
}

// wantChildren waits until tree shows exactly these children of the resource, all ready, and
// exits 0.
func wantChildren(t *testing.T, kind, name, ns string, kinds []string) {
	t.Helper()
	waitFor(t, time.Minute, fmt.Sprintf("tree %s %s to show %v ready", kind, name, kinds), func(context.Context) error {
		var root plugin.Node
		code := pluginJSON(t, &root, "tree", kind, name, "-n", ns)
		var got []string
		for _, c := range root.Children {
			if !c.Ready {
				return fmt.Errorf("%s %s is %s: %s", c.Kind, c.Name, c.Status, c.Message)
			}
			got = append(got, c.Kind)
		}
		if code != plugin.ExitOK || !root.Ready || !slices.Equal(got, kinds) {
			return fmt.Errorf("exit %d, ready %v (%s: %s), children %v", code, root.Ready, root.Reason, root.Message, got)
		}
		return nil
	})
}

func childOf(root plugin.Node, kind string) *plugin.Node {
	for i := range root.Children {
		if root.Children[i].Kind == kind {
			return &root.Children[i]
		}
	}
	return nil
}

func setPaused(t *testing.T, obj client.Object, paused string) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, infrav1alpha1.PauseAnnotation, paused)
	if err := k8sClient.Patch(context.Background(), obj, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
}

// TestPluginWorkspaceCommandsActOnlyOnTheCallersWorkspaces: through the gRPC API with real
// tokens, bob neither sees, stops nor opens alice's workspace (exit 6), and alice does all three.
func TestPluginWorkspaceCommandsActOnlyOnTheCallersWorkspaces(t *testing.T) {
	const name = "alice-plugin"
	api := workspacev1.NewWorkspaceServiceClient(apiConn(t))
	if _, err := api.Create(as(t, "alice", 2*time.Minute), &workspacev1.CreateWorkspaceRequest{Workspace: &workspacev1.Workspace{Name: name}, Wait: true}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = api.Delete(as(t, "alice", time.Minute), &workspacev1.WorkspaceRef{Namespace: workspaceNS, Name: name})
	})
	ws := func(user string, args ...string) []string { return wsArgs(t, user, args...) }
	var bobs []map[string]any
	if code := pluginJSON(t, &bobs, ws("bob", "list")...); code != plugin.ExitOK {
		t.Fatalf("bob's list: exit %d", code)
	}
	for _, w := range bobs {
		if w["name"] == name {
			t.Errorf("bob's list shows alice's workspace: %v", w)
		}
	}
	for _, cmd := range [][]string{{"stop", name}, {"open", name}, {"start", name}} {
		// Alice's workspace is, to bob, one that does not exist.
		if out, code := kubectlCloudspace(t, ws("bob", cmd...)...); code != plugin.ExitNotFound || len(out) > 0 {
			t.Errorf("bob's ws %v: exit %d, output %q; want %d and nothing", cmd, code, out, plugin.ExitNotFound)
		}
	}
	var access map[string]any
	// KWOK runs no pod to forward to: the real node (test/real) opens the IDE through the forward.
	if code := pluginJSON(t, &access, ws("alice", "open", name, "--forward=false")...); code != plugin.ExitOK || access["password"] == "" || access["url"] == "" {
		t.Errorf("alice's ws open: exit %d, %v", code, access)
	}
	if _, code := kubectlCloudspace(t, ws("alice", "stop", name)...); code != plugin.ExitOK {
		t.Fatalf("alice's ws stop: exit %d", code)
	}
	got := &infrav1alpha1.Workspace{}
	if err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: workspaceNS, Name: name}, got); err != nil || got.Spec.Running == nil || *got.Spec.Running {
		t.Errorf("after alice's stop: running %v, %v", got.Spec.Running, err)
	}
}

func newTestNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "plugin-"}}
	if err := k8sClient.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), ns) })
	return ns.Name
}

// newDemo is a resource of Demo, the pure chart kind in test/testdata.
func newDemo(ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"greeting": "hi"}}}
	u.SetGroupVersionKind(framework.DemoGVK)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// TestPluginStartsAVM: vm start raises a VM's spec.startRequests, which starts a VM the operator
// stopped and changes nothing else of a running one (its launcher is not replaced); a VM that
// does not exist is exit 5.
func TestPluginStartsAVM(t *testing.T) {
	ctx := context.Background()
	ns := "vm-plugin-e2e"
	if err := k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	vm := &infrav1alpha1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dev"}}
	if err := k8sClient.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	framework.WaitFor(t, time.Minute, "VM dev Running", vmPhase(vm, infrav1alpha1.VMRunning))
	launcher := &corev1.Pod{}
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "dev-launcher"}, launcher); err != nil {
		t.Fatal(err)
	}
	out, code := kubectlCloudspace(t, "-n", ns, "vm", "start", "dev")
	if code != 0 || !strings.Contains(string(out), "start requested (spec.startRequests 1)") {
		t.Fatalf("vm start: exit %d, %q", code, out)
	}
	waitStartObserved(t, vm, func() (int64, int64, bool) {
		return vm.Spec.StartRequests, vm.Status.ObservedGeneration, vm.Status.Phase == infrav1alpha1.VMRunning
	})
	after := &corev1.Pod{}
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "dev-launcher"}, after); err != nil || after.UID != launcher.UID {
		t.Errorf("the running VM's launcher after vm start: %v (uid %s, was %s); want it untouched", err, after.UID, launcher.UID)
	}
	if _, code := kubectlCloudspace(t, "-n", ns, "vm", "start", "nope"); code != 5 {
		t.Errorf("vm start of a missing VM: exit %d, want 5", code)
	}
}

// TestPluginCreatesAndStartsWorkspaces: ws create makes a running workspace through the API;
// with no token given the plugin calls as the kubeconfig's user (here a ServiceAccount's
// token, a user of the API the cluster identifies); without --api, ws start raises the
// workspace's spec.startRequests with the caller's Kubernetes rights, as vm start does.
func TestPluginCreatesAndStartsWorkspaces(t *testing.T) {
	ctx := context.Background()
	out, code := kubectlCloudspace(t, wsArgs(t, "bob", "create", "bob-cli", "--cpu", "500m", "--wait", "--timeout", "2m")...)
	if code != plugin.ExitOK || !strings.Contains(string(out), "Running") {
		t.Fatalf("ws create: exit %d, %q", code, out)
	}
	ws := &infrav1alpha1.Workspace{}
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: workspaceNS, Name: "bob-cli"}, ws); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), ws) })
	if ws.Spec.Owner != "bob" || ws.Spec.Resources.CPU.String() != "500m" {
		t.Errorf("the created workspace: owner %q, cpu %s; want bob's, 500m", ws.Spec.Owner, ws.Spec.Resources.CPU)
	}

	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "cli-e2e"}})
	kubeconfig := tokenKubeconfig(t, serviceAccountToken(t, "cli-e2e", "dev", nil))
	args := []string{"--kubeconfig", kubeconfig, "ws", "--api", grpcAddr, "--api-ca-file", grpcTLS.CA, "list"}
	if out, code := kubectlCloudspace(t, args...); code != plugin.ExitOK {
		t.Errorf("ws list as the kubeconfig's ServiceAccount: exit %d, %q", code, out)
	}

	out, code = kubectlCloudspace(t, "-n", workspaceNS, "ws", "start", "bob-cli")
	if code != plugin.ExitOK || !strings.Contains(string(out), "workspace/bob-cli: start requested (spec.startRequests 1)") {
		t.Fatalf("ws start without --api: exit %d, %q", code, out)
	}
	waitStartObserved(t, ws, func() (int64, int64, bool) {
		return ws.Spec.StartRequests, ws.Status.ObservedGeneration, ws.Status.Phase == infrav1alpha1.WorkspaceRunning
	})
	if _, code := kubectlCloudspace(t, "-n", workspaceNS, "ws", "start", "nope"); code != plugin.ExitNotFound {
		t.Errorf("ws start of a missing workspace: exit %d, want %d", code, plugin.ExitNotFound)
	}
}

// tokenKubeconfig is the suite's kubeconfig with its user's credentials replaced by token.
func tokenKubeconfig(t *testing.T, token string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(cluster.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for name := range cfg.AuthInfos {
		cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: token}
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// waitStartObserved waits until obj (read into itself) has one start request, observed by the
// operator, and is running by state's account (its start requests, observed generation, and
// whether it runs).
func waitStartObserved(t *testing.T, obj client.Object, state func() (requests, observed int64, running bool)) {
	t.Helper()
	framework.WaitFor(t, time.Minute, obj.GetName()+"'s start request observed, running on", func(ctx context.Context) error {
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		if requests, observed, running := state(); requests != 1 || observed != obj.GetGeneration() || !running {
			return fmt.Errorf("startRequests %d, observed generation %d of %d, running %v", requests, observed, obj.GetGeneration(), running)
		}
		return nil
	})
}
