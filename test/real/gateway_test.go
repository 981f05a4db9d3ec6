package realnode

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
)

// gatewayAuthEnv is what a Subscription's config.env sets to have the IDEs trust the gateway
// (--workspace-ide-auth=gateway, docs/operations.md: "Operator flags").
var gatewayAuthEnv = corev1.EnvVar{Name: "CLOUDSPACE_WORKSPACE_IDE_AUTH", Value: "gateway"}

// checkGatewayIDE proves the IDE that trusts the gateway on a cluster that enforces
// NetworkPolicy, with the operator OLM installed and the Subscription configured: the IDE has
// no password Secret, the gateway's pod opens it without a login, and a pod of the same
// namespace without the gateway's label cannot connect until the workspace's NetworkPolicy is
// deleted, so the policy alone keeps it out.
func checkGatewayIDE(t *testing.T) {
	ctx := context.Background()
	ensureNamespace(t, workspaceNS)
	ws := &infrav1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Namespace: workspaceNS, Name: "hub-gateway"},
		Spec: infrav1alpha1.WorkspaceSpec{Owner: "alice", Storage: infrav1alpha1.WorkspaceStorage{Size: ptr.To(resource.MustParse("1Gi"))},
			Resources: infrav1alpha1.WorkspaceResources{CPU: ptr.To(resource.MustParse("250m")), Memory: ptr.To(resource.MustParse("512Mi"))}}}
	if err := k8sClient.Create(ctx, ws); err != nil {
		t.Fatal(err)
	}
	// Gone before the test's operator is removed, which must take its finalizer off.
	t.Cleanup(func() { deleteAndWait(t, ws) })
	// The probes' pods start with the IDE.
	gateway, outsider := newGatewayPod(t, "hub-gateway-pod", ""), newProbePod(t, workspaceNS, "hub-outsider", nil, "")
	runningIDE(t, ws)
	var secrets corev1.SecretList
	if err := k8sClient.List(ctx, &secrets, client.InNamespace(workspaceNS), client.MatchingLabels{"app.kubernetes.io/instance": ws.Name}); err != nil {
		t.Fatal(err)
	}
	if len(secrets.Items) > 0 {
		t.Errorf("the gateway-trusting workspace has the Secret %s; want no password", secrets.Items[0].Name)
	}
	waitRunning(t, gateway, outsider)
	ide := []target{{"ide", serviceAddr(t, workspaceNS, ws.Name)}}
	expect(t, gateway, probe(t, gateway, ide), ide, nil)
	expect(t, outsider, probe(t, outsider, ide), nil, ide)
	status, location := httpGet(t, gateway, ide[0].host)
	if status != 200 && (status/100 != 3 || strings.Contains(location, "login")) {
		t.Errorf("the gateway's GET / of the IDE: %d, Location %q; want the workbench without a login", status, location)
	}
	t.Logf("the gateway's GET / of the IDE: %d, Location %q", status, location)
	withoutPolicies(t, []client.Object{ws}, []client.ObjectKey{client.ObjectKeyFromObject(ws)}, func() {
		waitFor(t, time.Minute, "the outsider reaching the IDE without its NetworkPolicy", func(context.Context) error {
			return expectErr(outsider, probe(t, outsider, ide), ide, nil)
		})
	})
}

// httpGet is the status and Location of a GET / of host:port made from the pod with bash alone.
func httpGet(t *testing.T, pod *corev1.Pod, hostPort string) (status int, location string) {
	t.Helper()
	host, port, _ := net.SplitHostPort(hostPort)
	script := fmt.Sprintf(`exec 3<>/dev/tcp/%s/%s && printf 'GET / HTTP/1.1\r\nHost: ide\r\nConnection: close\r\n\r\n' >&3 && timeout 10 cat <&3 | head -c 4096`, host, port)
	out := execIn(t, pod.Namespace, "pod/"+pod.Name, pod.Spec.Containers[0].Name, "bash", script)
	head, _, _ := strings.Cut(out, "\r\n\r\n")
	lines := strings.Split(head, "\r\n")
	if _, err := fmt.Sscanf(lines[0], "HTTP/1.1 %d", &status); err != nil {
		t.Fatalf("GET / of %s from %s: %q", hostPort, pod.Name, out)
	}
	for _, l := range lines[1:] {
		if name, value, ok := strings.Cut(l, ":"); ok && strings.EqualFold(name, "Location") {
			location = strings.TrimSpace(value)
		}
	}
	return status, location
}

// deleteAndWait deletes o and waits until it is gone.
func deleteAndWait(t *testing.T, o client.Object) {
	t.Helper()
	if err := k8sClient.Delete(context.Background(), o); err != nil && !apierrors.IsNotFound(err) {
		t.Error(err)
		return
	}
	waitFor(t, 2*time.Minute, o.GetName()+" gone", func(ctx context.Context) error {
		err := k8sClient.Get(ctx, client.ObjectKeyFromObject(o), o)
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (%v)", err)
	})
}
