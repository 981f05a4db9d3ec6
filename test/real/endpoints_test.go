package realnode

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/pkg/workspacev1"
	"github.com/cloudspace-dev/cloudspace-operator/test/infra/images"
)

var authTokenRequest = authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}

// nodeHTTP is an HTTP client whose connections start inside the node's network namespace.
// The operator's metrics certificate is its own, self-signed: it is not verified here; the
// bearer token is what the endpoint checks.
var nodeHTTP = &http.Client{
	Timeout: 10 * time.Second,
	Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return node.DialContext(ctx, network, addr)
		},
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // see above
	},
}

// serviceAddr is a Service's ClusterIP and port.
func serviceAddr(t *testing.T, ns, name string) string {
	t.Helper()
	var svc corev1.Service
	if err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &svc); err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort(svc.Spec.ClusterIP, fmt.Sprint(svc.Spec.Ports[0].Port))
}

func get(url, token string) (int, string, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := nodeHTTP.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// checkMetrics scrapes the operator's metrics through their Service with the token of a
// service account bound to the bundle's metrics-reader role, and is refused without one.
func checkMetrics(t *testing.T) {
	url := "https://" + serviceAddr(t, operatorNS, "cloudspace-operator-controller-manager-metrics-service") + "/metrics"
	token := bindClusterRole(t, "metrics-scraper", "cloudspace-operator-metrics-reader")
	waitFor(t, time.Minute, "metrics with a token", func(context.Context) error {
		code, body, err := get(url, token)
		if err != nil || code != http.StatusOK || !strings.Contains(body, "controller_runtime_reconcile_total") {
			return fmt.Errorf("GET %s: %d %v %.200s", url, code, err, body)
		}
		return nil
	})
	if code, _, err := get(url, ""); err != nil || (code != http.StatusUnauthorized && code != http.StatusForbidden) {
		t.Errorf("GET %s without a token: %d %v, want 401 or 403", url, code, err)
	}
}

// checkHealth asks the operator's probes' endpoints on its pod, as the kubelet does.
func checkHealth(t *testing.T, pod *corev1.Pod) {
	for _, path := range []string{"/healthz", "/readyz"} {
		url := "http://" + net.JoinHostPort(pod.Status.PodIP, "8081") + path
		if code, body, err := get(url, ""); err != nil || code != http.StatusOK {
			t.Errorf("GET %s: %d %v %s", url, code, err, body)
		}
	}
}

// checkWebhooks creates VirtualMachines the defaulting and validating webhooks answer: a dry
// run comes back with the default disk (the registry's, by digest), and a backend the cluster
// does not serve is refused by the validating webhook, which only it can tell.
func checkWebhooks(t *testing.T) {
	ctx := context.Background()
	vm := &infrav1alpha1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: "webhook-probe", Namespace: testNS},
		Spec:       infrav1alpha1.VirtualMachineSpec{CPU: ptr.To(intstr.FromInt32(1)), Memory: ptr.To(resource.MustParse("1Gi"))},
	}
	waitFor(t, time.Minute, "the defaulting webhook", func(ctx context.Context) error {
		probe := vm.DeepCopy()
		if err := k8sClient.Create(ctx, probe, client.DryRunAll); err != nil {
			return err
		}
		if want := ref(t, images.DiskRepo+":debian-12"); probe.Spec.Image != want {
			return fmt.Errorf("spec.image defaulted to %q, want %q", probe.Spec.Image, want)
		}
		return nil
	})
	vm.Spec.Backend = infrav1alpha1.BackendKubeVirt
	err := k8sClient.Create(ctx, vm, client.DryRunAll)
	if err == nil || !strings.Contains(err.Error(), "spec.backend") || !strings.Contains(err.Error(), "does not serve kubevirt.io/v1") {
		t.Errorf("a VM asking for KubeVirt where none is served: %v, want the webhook's refusal naming spec.backend", err)
	}
}

// checkGRPC calls the workspace API through its Service over TLS, verified against the CA of
// the certificate the administrator gave it: the health service answers, a user's token lists
// workspaces, a wrong token is refused.
func checkGRPC(t *testing.T, api apiAccess) {
	pemCA, err := os.ReadFile(api.ca)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pemCA)
	creds := credentials.NewTLS(&tls.Config{RootCAs: pool, ServerName: grpcService + "." + operatorNS + ".svc", MinVersion: tls.VersionTLS12})
	conn, err := grpc.NewClient("passthrough:///"+serviceAddr(t, operatorNS, grpcService), grpc.WithTransportCredentials(creds),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) { return node.DialContext(ctx, "tcp", addr) }))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	waitFor(t, time.Minute, "the gRPC health service SERVING", func(ctx context.Context) error {
		resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			return err
		}
		if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			return fmt.Errorf("status %s", resp.GetStatus())
		}
		return nil
	})
	ws := workspacev1.NewWorkspaceServiceClient(conn)
	call := func(token string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := ws.List(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token), &workspacev1.ListWorkspacesRequest{})
		return err
	}
	if err := call(api.token); err != nil {
		t.Errorf("List as %s: %v", api.user, err)
	}
	if err := call(api.token + "x"); status.Code(err) != codes.Unauthenticated {
		t.Errorf("List with a wrong token: %v, want Unauthenticated", err)
	}
}
