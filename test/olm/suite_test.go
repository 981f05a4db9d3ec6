// Package olm installs the operator as its users do, through OLM: a catalog served by opm, a
// CatalogSource, an OperatorGroup and a Subscription (what `operator-sdk run bundle` and an
// OperatorHub install do), on a private embedded cluster with OLM's olm and catalog operators
// running as processes. KWOK fakes the operator's pod, so the installed manager's command line
// also runs as a local process. It runs inside hack/netns.sh (make test-olm): OLM's catalog
// operator and opm listen on every interface, which a private network namespace keeps private.
package olm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/cloudspace-dev/cloudspace-operator/test/framework"
)

const (
	olmNS      = "olm"
	operatorNS = "cloudspace-operator-system"
	appsNS     = "apps"
	// advertiseAddress is kube-apiserver's --advertise-address: in a namespace with only
	// loopback it finds none of its own. Nothing connects to it.
	advertiseAddress = "10.255.0.1"
)

var (
	cluster   *framework.Cluster
	k8sClient client.Client
	clientset *kubernetes.Clientset
	binDir    string
	work      string
)

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) (code int) {
	if os.Getenv("NETNS") == "" || os.Getenv("E2E_BIN_DIR") == "" || os.Getenv("OLM_CRDS") == "" {
		fmt.Fprintln(os.Stderr, "run `make test-olm`: it builds OLM and the cluster's binaries and runs this suite in a private network namespace")
		return 1
	}
	binDir = os.Getenv("E2E_BIN_DIR")
	var err error
	if work, err = os.MkdirTemp("", "cloudspace-olm-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if code == 0 {
			os.RemoveAll(work)
		} else {
			fmt.Fprintf(os.Stderr, "olm: logs kept in %s\n", work)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	os.Setenv("DEV_CLUSTER_ADVERTISE_ADDRESS", advertiseAddress)
	if cluster, err = framework.StartCluster(ctx, filepath.Join(work, "cluster"), "olm"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := cluster.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "olm: stopping the cluster: %v\n", err)
			code = 1
		}
	}()
	stop, err := setUp(ctx)
	defer stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// setUp installs OLM's CRDs and namespaces and starts OLM's two operators; stop ends them.
func setUp(ctx context.Context) (stop func(), err error) {
	var procs []*framework.Process
	stop = func() {
		for _, p := range procs {
			_ = p.Stop(30 * time.Second)
		}
	}
	if k8sClient, err = client.New(cluster.Config, client.Options{Scheme: framework.OLMScheme()}); err != nil {
		return stop, err
	}
	if clientset, err = kubernetes.NewForConfig(cluster.Config); err != nil {
		return stop, err
	}
	if _, err := envtest.InstallCRDs(cluster.Config, envtest.CRDInstallOptions{Paths: []string{os.Getenv("OLM_CRDS")}, ErrorIfPathMissing: true}); err != nil {
		return stop, fmt.Errorf("installing OLM's CRDs: %w", err)
	}
	for _, ns := range []string{olmNS, operatorNS, appsNS} {
		if err := k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return stop, err
		}
	}
	// olm serves its health and metrics over TLS only with a certificate, a key and a client
	// CA; catalog is given the same.
	tls, err := framework.NewTLSFiles(filepath.Join(work, "olm-tls"))
	if err != nil {
		return stop, err
	}
	common := []string{"--namespace", olmNS, "--writeStatusName", "", "--tls-cert", tls.Cert, "--tls-key", tls.Key, "--client-ca", tls.CA}
	env := []string{"KUBECONFIG=" + cluster.Kubeconfig, "OPERATOR_NAMESPACE=" + olmNS, "OPERATOR_NAME=olm-operator"}
	for name, args := range map[string][]string{
		"olm":     slices.Concat(common, []string{"--writePackageServerStatusName", ""}),
		"catalog": slices.Concat(common, []string{"--set-workload-user-id=false"}),
	} {
		p, err := framework.StartProcess(filepath.Join(binDir, name), filepath.Join(work, name+".log"), env, args...)
		if err != nil {
			return stop, err
		}
		procs = append(procs, p)
	}
	return stop, nil
}
