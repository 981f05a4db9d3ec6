package realnode

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/engine"
	"github.com/cloudspace-dev/cloudspace-operator/test/framework"
	"github.com/cloudspace-dev/cloudspace-operator/test/infra/bundle"
	"github.com/cloudspace-dev/cloudspace-operator/test/infra/images"
)

// scorecardNS is where scorecard runs its test pods and creates the alm-examples.
const scorecardNS = "real-scorecard"

// scorecardWait bounds the whole scorecard run: the stock tests, then one pod of the operator's
// three tests, which boots the VirtualMachine example once in software emulation (2 to 3
// minutes on this project's 2-core machines, the cluster running; up to 5 with other guests).
const scorecardWait = "14m"

// checkScorecard runs operator-sdk scorecard on the bundle image, as users run it: each test in
// a pod from its image (the stock tests' and the operator's own, named by digest in the pushed
// bundle), with a service account given the rights docs/operations.md ("Scorecard") lists.
func checkScorecard(t *testing.T) {
	ensureNamespace(t, scorecardNS)
	scorecardAccount(t)
	busybox := env["REGISTRY"] + "/busybox:1.35"
	out, err := sdk(t, "scorecard", env["REGISTRY"]+"/"+images.BundleRepo+":v"+version(),
		"--namespace", scorecardNS, "--service-account", "scorecard", "--storage-image", busybox, "--untar-image", busybox,
		"--wait-time", scorecardWait, "--output", "json")
	var list struct {
		Items []struct {
			Spec struct {
				Image      string   `json:"image"`
				Entrypoint []string `json:"entrypoint"`
			} `json:"spec"`
			Status struct {
				Results []struct {
					Name, State string
					Errors      []string
					Log         string
				} `json:"results"`
			} `json:"status"`
		} `json:"items"`
	}
	if jerr := json.Unmarshal(out, &list); jerr != nil {
		t.Fatalf("operator-sdk scorecard: %v, %v\n%s", err, jerr, out)
	}
	passed, results := 0, 0
	for _, item := range list.Items {
		for _, r := range item.Status.Results {
			results++
			if r.State != "pass" {
				t.Errorf("scorecard %s (%s): %s %v\n%s", r.Name, item.Spec.Image, r.State, r.Errors, r.Log)
				continue
			}
			passed++
		}
	}
	t.Logf("scorecard: %d of %d tests passed, in %d pods", passed, results, len(list.Items))
	if passed != 9 || err != nil {
		t.Errorf("scorecard: %d tests passed, want the 6 stock and the 3 of the operator (%v)", passed, err)
	}
}

// scorecardAccount is scorecard's service account, with the rights docs/operations.md ("Scorecard") lists: the kinds'
// editor roles, reading every kind of child the charts render (the orphan test lists them)
// and deleting the PersistentVolumeClaims a reclaim policy keeps, in its namespace.
func scorecardAccount(t *testing.T) {
	t.Helper()
	read := []string{"get", "list", "watch"}
	objs := []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "scorecard", Namespace: scorecardNS}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "scorecard-children", Namespace: scorecardNS},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims"}, Verbs: append(read, "delete")},
				{APIGroups: []string{""}, Resources: []string{"serviceaccounts", "services", "secrets", "pods"}, Verbs: read},
				{APIGroups: []string{"apps"}, Resources: []string{"daemonsets", "deployments"}, Verbs: read},
				{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"networkpolicies", "ingresses"}, Verbs: read},
			}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "scorecard-children", Namespace: scorecardNS},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "scorecard-children"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "scorecard", Namespace: scorecardNS}}},
	}
	for _, kind := range []string{"genericdaemon", "virtualmachine", "workspace"} {
		objs = append(objs, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "scorecard-" + kind, Namespace: scorecardNS},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cloudspace-operator-" + kind + "-editor-role"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "scorecard", Namespace: scorecardNS}}})
	}
	for _, o := range objs {
		if err := k8sClient.Create(context.Background(), o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
}

// sdk runs operator-sdk with the cluster's environment (its kubeconfig, and the CA bundle it
// pulls images from the registry with); it returns the standard output.
func sdk(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	start := time.Now()
	cmd := exec.Command(filepath.Join(framework.RepoRoot(), "bin", "operator-sdk"), args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+env["KUBECONFIG"], "SSL_CERT_FILE="+env["SSL_CERT_FILE"])
	cmd.Dir = t.TempDir() // where it unpacks a bundle image, and scorecard its test output
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	t.Logf("operator-sdk %s: %s", args[0], time.Since(start).Round(100*time.Millisecond))
	if err != nil {
		err = fmt.Errorf("%w: %s", err, stderr.String())
	}
	return out, err
}

// checkUpgrade upgrades to the next version with run bundle-upgrade while a GenericDaemon is
// served: the new CSV succeeds, the old one goes, the new operator (its own image) reconciles
// the GenericDaemon and writes nothing to it or its children.
func checkUpgrade(t *testing.T) {
	ctx := context.Background()
	gd := &infrav1alpha1.GenericDaemon{
		ObjectMeta: metav1.ObjectMeta{Name: "upgrade-daemon", Namespace: testNS},
		Spec:       infrav1alpha1.GenericDaemonSpec{Image: env["GD_TEST_IMAGE"], Label: "logs"},
	}
	if err := k8sClient.Create(ctx, gd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), gd) })
	waitDaemonRunning(t, gd)
	served := []*unstructured.Unstructured{{}}
	served[0].SetGroupVersionKind(infrav1alpha1.GroupVersion.WithKind("GenericDaemon"))
	served[0].SetNamespace(gd.Namespace)
	served[0].SetName(gd.Name)
	before, err := framework.Versions(ctx, k8sClient, served)
	if err != nil {
		t.Fatal(err)
	}

	realInstall(t, "upgrade")
	waitCSV(t, bundle.CSVName(images.UpgradeVersion))
	operatorPod(t, ref(t, images.OperatorRepo+":v"+images.UpgradeVersion))
	waitReconciled(t, "genericdaemon")
	for end := time.Now().Add(engine.DefaultStatusInterval + 2*time.Second); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		after, err := framework.Versions(ctx, k8sClient, served)
		if err != nil {
			t.Fatal(err)
		}
		if changed := framework.ChangedVersion(before, after); changed != "" {
			t.Fatalf("written after the upgrade: %s", changed)
		}
	}
}

// waitReconciled waits until the running operator's metrics count a successful reconcile of
// the kind's controller.
func waitReconciled(t *testing.T, kind string) {
	t.Helper()
	url := "https://" + serviceAddr(t, operatorNS, "cloudspace-operator-controller-manager-metrics-service") + "/metrics"
	token := bindClusterRole(t, "metrics-scraper", "cloudspace-operator-metrics-reader")
	waitFor(t, time.Minute, "the new operator's first reconcile of a "+kind, func(context.Context) error {
		code, body, err := get(url, token)
		if err != nil || code != 200 {
			return fmt.Errorf("GET %s: %d %v", url, code, err)
		}
		counts, err := framework.SumCounter([]byte(body), "controller_runtime_reconcile_total", func(l map[string]string) (string, bool) {
			return l["result"], strings.HasPrefix(l["controller"], kind)
		})
		if err != nil {
			return err
		}
		if counts["success"] < 1 {
			return fmt.Errorf("reconciles %v", counts)
		}
		return nil
	})
}
