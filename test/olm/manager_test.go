package olm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	resourcehelper "k8s.io/kubectl/pkg/util/resource"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cloudspace-dev/cloudspace-operator/test/framework"
)

// installedManager is the manager of an installed CSV, run as a local process: KWOK runs no
// container, so the Deployment OLM made is Available but nothing in it runs.
type installedManager struct {
	*framework.Process
	csv         *operatorsv1alpha1.ClusterServiceVersion
	probeAddr   string
	metricsAddr string
}

// runInstalledManager runs the manager container of csv's Deployment as a local process: its
// arguments and environment as the kubelet would give them (variables expanded, field
// references resolved from the Deployment OLM made), with the credentials of its service
// account, so that the CSV's RBAC is what it runs with. Only what a process outside the pod
// cannot have is its own: the addresses it listens on (127.0.0.1, free ports; metrics in plain
// HTTP, for the test to read), the watches file and the webhook certificate (files the image
// carries or OLM mounts).
func runInstalledManager(t *testing.T, csv *operatorsv1alpha1.ClusterServiceVersion) *installedManager {
	t.Helper()
	spec := csv.Spec.InstallStrategy.StrategySpec.DeploymentSpecs[0]
	live := &appsv1.Deployment{}
	if err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: operatorNS, Name: spec.Name}, live); err != nil {
		t.Fatal(err)
	}
	container := spec.Spec.Template.Spec.Containers[0]
	env, err := containerEnv(container, live)
	if err != nil {
		t.Fatal(err)
	}
	m := &installedManager{csv: csv, probeAddr: freeAddr(t), metricsAddr: freeAddr(t)}
	tls, err := framework.NewTLSFiles(filepath.Join(t.TempDir(), "webhook"))
	if err != nil {
		t.Fatal(err)
	}
	args := localArgs(expand(container.Args, env), map[string]string{
		"--watches-file":              filepath.Join(framework.RepoRoot(), "watches.yaml"),
		"--health-probe-bind-address": m.probeAddr,
		"--metrics-bind-address":      m.metricsAddr,
		"--metrics-secure":            "false",
		"--grpc-bind-address":         freeAddr(t),
		"--webhook-bind-address":      freeAddr(t),
		"--webhook-cert-dir":          filepath.Dir(tls.Cert),
	})
	waitForSecretsGrant(t, spec.Spec.Template.Spec.ServiceAccountName)
	kubeconfig := serviceAccountKubeconfig(t, spec.Spec.Template.Spec.ServiceAccountName)
	log := filepath.Join(work, csv.Name+"-manager.log")
	if m.Process, err = framework.StartProcess(os.Getenv("E2E_OPERATOR"), log, append(env, "KUBECONFIG="+kubeconfig), args...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Stop(time.Minute) })
	waitFor(t, time.Minute, csv.Name+"'s manager to be ready (log: "+log+")", func(ctx context.Context) error {
		if err, exited := m.Exited(); exited {
			t.Fatalf("the manager exited: %v (log: %s)", err, log)
		}
		_, err := framework.HTTPGet(ctx, m.probeAddr, "/readyz")
		return err
	})
	return m
}

// containerEnv resolves the container's env as the kubelet does for the pod of dep: values as
// they are, field references from the pod's metadata (the Deployment's template, where OLM puts
// the olm.targetNamespaces annotation WATCH_NAMESPACE reads; no name, as there is no pod),
// resource references from the container's resources (MEMORY_LIMIT).
func containerEnv(c corev1.Container, dep *appsv1.Deployment) ([]string, error) {
	var out []string
	for _, e := range c.Env {
		var v string
		var err error
		switch {
		case e.ValueFrom == nil:
			v = e.Value
		case e.ValueFrom.FieldRef != nil:
			v, err = fieldValue(e.ValueFrom.FieldRef.FieldPath, dep)
		case e.ValueFrom.ResourceFieldRef != nil:
			v, err = resourcehelper.ExtractContainerResourceValue(e.ValueFrom.ResourceFieldRef, &c)
		default:
			err = errors.New("only values, field and resource references are resolved here")
		}
		if err != nil {
			return nil, fmt.Errorf("env %s: %w", e.Name, err)
		}
		out = append(out, e.Name+"="+v)
	}
	return out, nil
}

var annotationPath = regexp.MustCompile(`^metadata\.annotations\['([^']+)'\]$`)

func fieldValue(path string, dep *appsv1.Deployment) (string, error) {
	switch path {
	case "metadata.namespace":
		return dep.Namespace, nil
	case "metadata.name":
		// The manager runs here as a process, in no pod: it has no pod's name, and the alerting
		// rules' installer, which needs one, stays off (app.SetupAlerts).
		return "", nil
	}
	if m := annotationPath.FindStringSubmatch(path); m != nil {
		v, ok := dep.Spec.Template.Annotations[m[1]]
		if !ok {
			return "", fmt.Errorf("the pod template has no annotation %s", m[1])
		}
		return v, nil
	}
	return "", fmt.Errorf("field %s is not resolved here", path)
}

// expand replaces $(NAME) in args with env's values, as the kubelet does.
func expand(args []string, env []string) []string {
	values := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		values[k] = v
	}
	ref := regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = ref.ReplaceAllStringFunc(a, func(s string) string {
			if v, ok := values[s[2:len(s)-1]]; ok {
				return v
			}
			return s
		})
	}
	return out
}

// localArgs replaces the values of the flags in local (and adds those args lack).
func localArgs(args []string, local map[string]string) []string {
	var out []string
	seen := map[string]bool{}
	for _, a := range args {
		name, _, _ := strings.Cut(a, "=")
		if v, ok := local[name]; ok {
			a, seen[name] = name+"="+v, true
		}
		out = append(out, a)
	}
	for name, v := range local {
		if !seen[name] {
			out = append(out, name+"="+v)
		}
	}
	return out
}

// serviceAccountKubeconfig writes a kubeconfig that authenticates as the service account.
func serviceAccountKubeconfig(t *testing.T, name string) string {
	t.Helper()
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}
	tok, err := clientset.CoreV1().ServiceAccounts(operatorNS).CreateToken(context.Background(), name, req, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ca := cluster.Config.CAData
	if len(ca) == 0 {
		if ca, err = os.ReadFile(cluster.Config.CAFile); err != nil {
			t.Fatal(err)
		}
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["olm"] = &clientcmdapi.Cluster{Server: cluster.Config.Host, CertificateAuthorityData: ca}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: tok.Status.Token}
	cfg.Contexts["olm"] = &clientcmdapi.Context{Cluster: "olm", AuthInfo: name}
	cfg.CurrentContext = "olm"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

func freeAddr(t *testing.T) string {
	t.Helper()
	port, err := framework.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", port)
}

// waitReconciled waits until the manager has reconciled at least n resources successfully.
func (m *installedManager) waitReconciled(t *testing.T, n int) {
	t.Helper()
	waitFor(t, time.Minute, fmt.Sprintf("%d reconciles", n), func(ctx context.Context) error {
		got, err := framework.Reconciles(ctx, m.metricsAddr, func(l map[string]string) bool { return l["result"] == "success" })
		if err != nil {
			return err
		}
		if got < float64(n) {
			return fmt.Errorf("%v successful reconciles", got)
		}
		return nil
	})
}

// waitForSecretsGrant waits until the service account may read Secrets in the operator's
// namespace, which the manager does first (the workspace access key). OLM grants a CSV's
// namespaced permissions around when it reports Succeeded and, on an upgrade, retires the
// replaced CSV's: a manager started in between is refused, as a pod restarted by its
// Deployment would be once.
func waitForSecretsGrant(t *testing.T, serviceAccount string) {
	t.Helper()
	waitFor(t, time.Minute, serviceAccount+" may read Secrets in "+operatorNS, func(ctx context.Context) error {
		review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:               "system:serviceaccount:" + operatorNS + ":" + serviceAccount,
			Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + operatorNS},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: operatorNS, Verb: "get", Resource: "secrets"},
		}}
		if err := k8sClient.Create(ctx, review); err != nil {
			return err
		}
		if !review.Status.Allowed {
			return fmt.Errorf("not yet: %s", review.Status.Reason)
		}
		return nil
	})
}
