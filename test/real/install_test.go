package realnode

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cloudspace-dev/cloudspace-operator/test/framework"
	"github.com/cloudspace-dev/cloudspace-operator/test/infra/bundle"
	"github.com/cloudspace-dev/cloudspace-operator/test/infra/devwebhook"
	"github.com/cloudspace-dev/cloudspace-operator/test/infra/images"
)

const (
	operatorNS = "cloudspace-operator-system"
	// deployment is the operator's Deployment, as the CSV names it.
	deployment = "cloudspace-operator-controller-manager"
	// testNS holds what the tests create.
	testNS = "real-test"
)

// TestOperatorSDKInstall installs the operator as the README tells users to, with operator-sdk
// run bundle of the bundle image in the registry, uses it, upgrades it with run bundle-upgrade
// and removes it with operator-sdk cleanup.
func TestOperatorSDKInstall(t *testing.T) {
	api := prepareOperatorNamespace(t)
	ensureNamespace(t, testNS)
	// What an interrupted run left is removed first, as it is at the end.
	realInstall(t, "uninstall")
	t.Cleanup(func() { realInstall(t, "uninstall") })
	// The node checks lose and drain this worker: it runs neither CoreDNS nor, cordoned during
	// the install, the operator and operator-sdk's registry pod. The suite's VM runs there.
	node := otherWorker(t)
	uncordon := cordon(t, node)
	// As on a cluster that runs Prometheus Operator: the operator installs its alerting rules.
	servePrometheusRules(t)
	realInstall(t, "install")
	csv := waitCSV(t, bundle.CSVName(version()))
	pod := operatorPod(t, ref(t, images.OperatorRepo+":v"+version()))
	uncordon()
	t.Logf("installed %s; operator pod %s on %s", csv.Name, pod.Name, pod.Spec.NodeName)
	vm := createRealVM(t, node)
	promPod := startPrometheus(t, node)

	t.Run("metrics answer through their Service, to an authorized token only", func(t *testing.T) { checkMetrics(t) })
	var prom prometheusServer
	t.Run("Prometheus scrapes the operator with the metrics-reader's rights, the alerting rules loaded", func(t *testing.T) { prom = checkPrometheusScrapes(t, promPod) })
	t.Run("health answers on the pod", func(t *testing.T) { checkHealth(t, pod) })
	t.Run("admission webhooks answer through their Service", checkWebhooks)
	t.Run("the gRPC API answers through its Service", func(t *testing.T) { checkGRPC(t, api) })
	// Most of what follows waits: for a guest's boots in software emulation, for idle
	// timeouts, for failed starts. The lanes run at once, each one's checks one after the
	// other; no lane drains a node, replaces the operator, or shares an API user's quota with
	// another (the idle lane is Carol's). The one node a lane adds and removes takes no pod but
	// its daemon's (checkDaemonOnLabelledNodes).
	t.Run("lanes", func(t *testing.T) {
		lane(t, "virtual machines",
			check{"a VM boots, answers SSH with its user's key, reaches only what its policy allows, runs on while a session is open, stops when idle, boots again with its disk", func(t *testing.T) { checkVirtualMachine(t, vm) }})
		lane(t, "scorecard", check{"scorecard passes, its tests run in pods", func(t *testing.T) {
			waitBooted(t, vm)
			checkScorecard(t)
		}})
		lane(t, "idle and daemons",
			check{"an unused IDE is warned of on Watch, then stopped, and starts with its files; one in use runs on", func(t *testing.T) { checkIdleWorkspaces(t, api.as("carol", api.third)) }},
			check{"a GenericDaemon follows its label from worker to worker", checkDaemonOnLabelledNodes})
		lane(t, "tenants and failures",
			check{"a GenericDaemon's pods run on the node", checkGenericDaemon},
			check{"a GenericDaemon whose image cannot be pulled says so", checkUnpullableDaemon},
			check{"a workspace opens in a browser, its files survive a restart", func(t *testing.T) { checkWorkspace(t, api) }},
			check{"create-and-wait for a workspace whose image cannot be pulled says so within a minute", func(t *testing.T) { checkUnpullableWorkspace(t, api) }},
			check{"create-and-wait for a workspace no node has room for answers at the deadline with the scheduler's reason", func(t *testing.T) { checkUnplaceableWorkspace(t, api.as("bob", api.other)) }},
			check{"a crash-looping IDE is Degraded within a minute, then stopped after its failed starts", checkCrashingWorkspace},
			check{"the crash loop fires CloudspaceCrashLooping in Prometheus, with its runbook; the starts before it are there, by phase", func(t *testing.T) { checkCrashLoopAlert(t, prom) }},
			check{"a non-root pod binds port 22 only with the unprivileged-port sysctl", checkPortSysctl},
			check{"a VM whose launcher keeps failing is stopped after its failed starts, Degraded with the reason", checkCrashingVM},
			check{"the workspace API's NetworkPolicy admits only namespaces labelled for it", checkAPIPolicy},
			check{"tenants' networks are enforced: from Alice's node and another, Bob reaches none of her IDE, her VM's launcher, the API server, the workspace API, the metadata address; DNS and the outside are open; her gateway reaches her IDE and her VM's guest", func(t *testing.T) {
				waitBooted(t, vm)
				checkTenantNetworks(t)
			}})
	})
	// The VM boots again meanwhile (after its idle stop).
	t.Run("run bundle-upgrade writes nothing to what the operator serves", func(t *testing.T) {
		defer cordon(t, node)() // the new operator's pod stays off the node the next checks lose
		checkUpgrade(t)
	})
	t.Run("a VM hibernated for being idle resumes with its process and memory, its disks and home kept; a changed memory boots it cold, saying why", func(t *testing.T) { checkVMRestarted(t, vm, prom) })
	t.Run("a lost node's workspace and VM are Failed naming it within about a minute, on the API too, new ones land elsewhere, and they run on when the node is back", func(t *testing.T) { checkLostNode(t, node, vm, api) })
	t.Run("a drained node's VM powers off cleanly and its workspace waits for it, both saying so; the workspace runs there again with its files, the VM with its home", func(t *testing.T) { checkDrain(t, node, vm) })
	t.Run("a portal's ServiceAccount acts for its users by the cluster's impersonation rule", func(t *testing.T) { checkPortal(t, api) })
	t.Run("operator-sdk cleanup leaves no operator pod, nor its alerting rules", func(t *testing.T) {
		realInstall(t, "uninstall")
		waitFor(t, 2*time.Minute, "the operator's pods to be gone", func(ctx context.Context) error {
			pods := operatorPods(t, ctx)
			if len(pods) > 0 {
				return fmt.Errorf("%d operator pods left, first %s", len(pods), pods[0].Name)
			}
			return nil
		})
		// Owned by the operator's Deployment, the PrometheusRule goes with it.
		waitFor(t, time.Minute, "the operator's PrometheusRule to be gone", func(ctx context.Context) error {
			rule := operatorRule(t)
			if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(rule), rule); !apierrors.IsNotFound(err) {
				return fmt.Errorf("still there (%v)", err)
			}
			return nil
		})
	})
}

// apiAccess is what a client of the gRPC API needs: a user's token and the CA of the API's
// certificate.
type apiAccess struct {
	user, token string
	// other is another user's token (Bob's), third a third's (Carol's).
	other, third string
	ca           string
}

// as is the same access as another user.
func (a apiAccess) as(user, token string) apiAccess {
	a.user, a.token = user, token
	return a
}

// waitBooted waits until the suite's VM lane has booted its guest (or given up on it).
func waitBooted(t *testing.T, vm *realVM) {
	t.Helper()
	start := time.Now()
	select {
	case <-vm.booted:
	case <-time.After(vmBootTimeout + time.Minute): // the VM lane did not run (go test -run)
	}
	t.Logf("waited %s for the VM lane's first boot", time.Since(start).Round(time.Second))
}

// check is a subtest: its name and what it runs.
type check struct {
	name string
	run  func(*testing.T)
}

// lane runs checks one after the other, at once with its parent's other lanes.
func lane(t *testing.T, name string, checks ...check) {
	t.Run(name, func(t *testing.T) {
		t.Parallel()
		for _, c := range checks {
			t.Run(c.name, c.run)
		}
	})
}

// grpcService is the API's Service; its certificate names it.
const grpcService = "cloudspace-operator-controller-manager-grpc"

// prepareOperatorNamespace creates the operator's namespace with what an administrator puts
// there before installing: the API's users and tokens, and the API's certificate (signed by a
// CA of the test, for the Service's name).
func prepareOperatorNamespace(t *testing.T) apiAccess {
	t.Helper()
	ensureNamespace(t, operatorNS)
	// localhost too: a user outside the cluster reaches the API through kubectl port-forward.
	tls, err := devwebhook.IssueFor(t.TempDir(), time.Hour, grpcService+"."+operatorNS+".svc", "localhost")
	if err != nil {
		t.Fatal(err)
	}
	api := apiAccess{user: "alice", token: randomToken(t), other: randomToken(t), third: randomToken(t), ca: tls.CA}
	cert, _ := os.ReadFile(tls.Cert)
	key, _ := os.ReadFile(tls.Key)
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Name: "cloudspace-api-tokens", Namespace: operatorNS},
			StringData: map[string]string{api.user: api.token, "bob": api.other, "carol": api.third}},
		{ObjectMeta: metav1.ObjectMeta{Name: "cloudspace-api-tls", Namespace: operatorNS}, Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{corev1.TLSCertKey: cert, corev1.TLSPrivateKeyKey: key}},
	} {
		if err := k8sClient.Create(context.Background(), s); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		if err := k8sClient.Update(context.Background(), s); err != nil && !apierrors.IsConflict(err) {
			t.Fatal(err)
		}
	}
	return api
}

func randomToken(t *testing.T) string {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func ensureNamespace(t *testing.T, name string) {
	t.Helper()
	err := k8sClient.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// realInstall runs hack/real-install.sh, the commands make real-install and the README give.
func realInstall(t *testing.T, verb string) {
	t.Helper()
	start := time.Now()
	cmd := exec.Command(filepath.Join(framework.RepoRoot(), "hack", "real-install.sh"), verb)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("hack/real-install.sh %s: %v\n%s", verb, err, out)
	}
	t.Logf("hack/real-install.sh %s: %s", verb, time.Since(start).Round(100*time.Millisecond))
}

// waitCSV waits until the CSV is Succeeded in the operator's namespace.
func waitCSV(t *testing.T, name string) *operatorsv1alpha1.ClusterServiceVersion {
	t.Helper()
	csv := &operatorsv1alpha1.ClusterServiceVersion{}
	waitFor(t, 3*time.Minute, "CSV "+name+" Succeeded", func(ctx context.Context) error {
		if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: operatorNS, Name: name}, csv); err != nil {
			return err
		}
		if csv.Status.Phase != operatorsv1alpha1.CSVPhaseSucceeded {
			return fmt.Errorf("phase %s: %s", csv.Status.Phase, csv.Status.Message)
		}
		return nil
	})
	return csv
}

func operatorPods(t *testing.T, ctx context.Context) []corev1.Pod {
	t.Helper()
	var pods corev1.PodList
	if err := k8sClient.List(ctx, &pods, client.InNamespace(operatorNS), client.MatchingLabels{"control-plane": "controller-manager"}); err != nil {
		t.Fatal(err)
	}
	return pods.Items
}

// operatorPod waits for the one operator pod running image (by digest), Ready with its
// container never restarted.
func operatorPod(t *testing.T, image string) *corev1.Pod {
	t.Helper()
	var pod corev1.Pod
	digest := image[strings.LastIndex(image, "@")+1:]
	waitFor(t, 3*time.Minute, "the operator pod running "+image, func(ctx context.Context) error {
		pods := operatorPods(t, ctx)
		if len(pods) != 1 {
			return fmt.Errorf("%d operator pods", len(pods))
		}
		pod = pods[0]
		if pod.Spec.Containers[0].Image != image {
			return fmt.Errorf("pod %s runs %s", pod.Name, pod.Spec.Containers[0].Image)
		}
		for _, s := range pod.Status.ContainerStatuses {
			switch {
			case !strings.HasSuffix(s.ImageID, digest):
				return fmt.Errorf("container %s runs image %s, want digest %s", s.Name, s.ImageID, digest)
			case s.RestartCount != 0:
				t.Fatalf("container %s restarted %d times: %+v", s.Name, s.RestartCount, s.LastTerminationState)
			case !s.Ready:
				return fmt.Errorf("container %s not ready: %+v", s.Name, s.State)
			}
		}
		if len(pod.Status.ContainerStatuses) == 0 {
			return fmt.Errorf("pod %s: %s", pod.Name, pod.Status.Phase)
		}
		return nil
	})
	return &pod
}

// bindClusterRole makes a service account in testNS bound to a cluster role and returns a
// token of it.
func bindClusterRole(t *testing.T, sa, role string) string {
	t.Helper()
	ctx := context.Background()
	objs := []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: testNS}},
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: testNS + "-" + sa},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: testNS}},
		},
	}
	for _, o := range objs {
		if err := k8sClient.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	return serviceAccountToken(t, testNS, sa)
}

func serviceAccountToken(t *testing.T, ns, sa string) string {
	t.Helper()
	tr, err := clientset.CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), sa, &authTokenRequest, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}
