package controllers

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// renderIDEPod renders the workspace chart for spec and returns the IDE Deployment's pod.
func renderIDEPod(t *testing.T, spec string) corev1.PodSpec {
	t.Helper()
	d := &appsv1.Deployment{}
	renderChild(t, "workspace", WorkspaceLifecycle{WorkspaceConfig: goldenWorkspaceConfig}, "Workspace", spec, d)
	return d.Spec.Template.Spec
}

func envValue(c corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

// runInitContainer runs c's shell script on this machine, with HOME (and the mount of the home
// volume) moved to home: what the container does to the volume, for real.
func runInitContainer(t *testing.T, c corev1.Container, home string, extraEnv ...string) {
	t.Helper()
	if len(c.Command) != 2 || c.Command[1] != "-c" || len(c.Args) != 1 {
		t.Fatalf("init container %s is not `sh -c SCRIPT`: %v %v", c.Name, c.Command, c.Args)
	}
	cmd := exec.Command("sh", "-c", c.Args[0])
	cmd.Env = append([]string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}, extraEnv...)
	for _, e := range c.Env {
		if e.Name != "HOME" {
			cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
		}
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("init container %s failed: %v\n%s", c.Name, err, out)
	}
}

// localOrigin is a local repository the init container's clone reads in place of the URL.
func localOrigin(t *testing.T) []string {
	t.Helper()
	origin := t.TempDir()
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "x"}} {
		if out, err := exec.Command("git", append([]string{"-C", origin}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	return []string{"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=url." + origin + ".insteadOf", "GIT_CONFIG_VALUE_0=https://example.com/a.git"}
}

// TestIDEOpensAFolderThatExists: code-server is told to open ~/project, and shows "Workspace
// does not exist" when the folder is missing, which it is on a fresh volume without git. The
// init container is run here, for real, on a directory standing in for the volume.
func TestIDEOpensAFolderThatExists(t *testing.T) {
	origin := localOrigin(t)
	cases := []struct {
		name, spec string
		before     string // a file in ~/project before the first start, if any
		cloned     bool
	}{
		{name: "no repository", spec: "{owner: alice}", cloned: false},
		{name: "with repository", spec: "{owner: alice, git: {url: 'https://example.com/a.git', ref: main}}", cloned: true},
		// A repository added later, or a volume adopted, finds files: no clone, no crash loop.
		{name: "repository into a filled folder", spec: "{owner: alice, git: {url: 'https://example.com/a.git'}}", before: "notes.txt",
			cloned: false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := renderIDEPod(t, tc.spec)
			ide := pod.Containers[0]
			if got := envValue(ide, "HOME"); got != "/home/coder" {
				t.Errorf("the IDE's HOME is %q, want /home/coder (an image without a home entry for uid 1000 fails on mkdir '/.config')", got)
			}
			folder := ide.Args[len(ide.Args)-1]
			if len(pod.InitContainers) != 1 {
				t.Fatalf("want one init container that prepares %s, got %d", folder, len(pod.InitContainers))
			}
			init := pod.InitContainers[0]
			if envValue(init, "HOME") != "/home/coder" || init.VolumeMounts[0].MountPath != "/home/coder" {
				t.Fatalf("the init container's HOME or mount is not the IDE's home: %+v", init)
			}
			home := t.TempDir()
			rel, _ := filepath.Rel("/home/coder", folder)
			project := filepath.Join(home, rel)
			if tc.before != "" {
				writeFile(t, filepath.Join(project, tc.before))
			}
			runInitContainer(t, init, home, origin...)
			if fi, err := os.Stat(project); err != nil || !fi.IsDir() {
				t.Fatalf("after the init container, the IDE's folder %s does not exist (%v)", folder, err)
			}
			if _, err := os.Stat(filepath.Join(project, ".git")); (err == nil) != tc.cloned {
				t.Errorf("cloned = %v, want %v", err == nil, tc.cloned)
			}
			// A second start leaves what the user made alone.
			writeFile(t, filepath.Join(project, "work.txt"))
			runInitContainer(t, init, home, origin...)
			if _, err := os.Stat(filepath.Join(project, "work.txt")); err != nil {
				t.Errorf("the second start lost the user's file: %v", err)
			}
		})
	}
}

func writeFile(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestIDEKeepsTheUsersHome: a HOME in spec.env is the user's; a second entry would make the
// server-side apply of the Deployment fail (duplicate entries for key [name="HOME"]).
func TestIDEKeepsTheUsersHome(t *testing.T) {
	ide := renderIDEPod(t, "{owner: alice, env: [{name: HOME, value: /home/coder/me}]}").Containers[0]
	var homes []string
	for _, e := range ide.Env {
		if e.Name == "HOME" {
			homes = append(homes, e.Value)
		}
	}
	if len(homes) != 1 || homes[0] != "/home/coder/me" {
		t.Errorf("HOME entries %v, want only the user's /home/coder/me", homes)
	}
}

// TestNetworkPolicyAdmitsTheIngressController: with the controller's namespace configured, a
// workspace's NetworkPolicy admits it by the namespace's name, which every namespace carries,
// and not only namespaces someone labelled (which nothing told them to do).
func TestNetworkPolicyAdmitsTheIngressController(t *testing.T) {
	cfg := goldenWorkspaceConfig
	cfg.IngressControllerNamespaces = []string{"ingress-nginx", "gateways"}
	np := &networkingv1.NetworkPolicy{}
	renderChild(t, "workspace", WorkspaceLifecycle{WorkspaceConfig: cfg}, "Workspace", "{owner: alice, ingress: {host: a.example.com}}", np)
	for _, peer := range np.Spec.Ingress[0].From {
		sel := peer.NamespaceSelector
		if sel == nil {
			continue
		}
		want := metav1.LabelSelectorRequirement{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: cfg.IngressControllerNamespaces}
		if len(sel.MatchLabels) != 0 || len(sel.MatchExpressions) != 1 || !equality.Semantic.DeepEqual(sel.MatchExpressions[0], want) {
			t.Errorf("namespace selector = %+v, want only %+v", sel, want)
		}
		return
	}
	t.Fatalf("the NetworkPolicy admits no namespace: %+v", np.Spec.Ingress)
}
