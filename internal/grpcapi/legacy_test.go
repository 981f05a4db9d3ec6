package grpcapi

import (
	"context"
	"crypto/tls"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/access"
	"github.com/cloudspace-dev/cloudspace-operator/pkg/pb"
	"github.com/cloudspace-dev/cloudspace-operator/pkg/workspacev1"
)

// asPortal turns the legacy listener on, acting as the user portal.
func asPortal(c *Config) {
	c.Namespaces = "ides"
	c.Legacy = LegacyConfig{Address: "127.0.0.1:0", User: "portal"}
}

// TestLegacyListenerActsAsItsUserAndServesNothingElse: a plaintext client without a token, as
// the tutorial's web backend dials, sees the configured user's workspaces and no one else's;
// the v1 API, health and reflection are not served there; TLS is not spoken there, and the
// API's own port still refuses plaintext.
func TestLegacyListenerActsAsItsUserAndServesNothingElse(t *testing.T) {
	ws := func(name, owner string) client.Object {
		return &infrav1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Namespace: "ides", Name: name},
			Spec: infrav1alpha1.WorkspaceSpec{Owner: owner}, Status: infrav1alpha1.WorkspaceStatus{Phase: infrav1alpha1.WorkspaceRunning}}
	}
	api := startTestAPI(t, []client.Object{ws("portals", "portal"), ws("alices", "alice")}, asPortal)
	plain, err := grpc.NewClient(api.legacyAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = plain.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	seed := pb.NewCloudIdeServiceClient(plain)
	if st, err := seed.GetPodSpaceStatus(ctx, &pb.QueryOption{Name: "portals", Namespace: "ides"}); err != nil || st.GetStatus() != podExist {
		t.Errorf("the portal's own workspace: %+v, %v; want it found", st, err)
	}
	if st, err := seed.GetPodSpaceStatus(ctx, &pb.QueryOption{Name: "alices", Namespace: "ides"}); err != nil || st.GetStatus() != podNotExist {
		t.Errorf("alice's workspace through the legacy listener: %+v, %v; want it not found", st, err)
	}
	if _, err := seed.DeleteSpace(ctx, &pb.QueryOption{Name: "alices", Namespace: "ides"}); status.Code(err) != codes.NotFound {
		t.Errorf("deleting alice's workspace through the legacy listener: %v, want NotFound", err)
	}
	_, err = workspacev1.NewWorkspaceServiceClient(plain).List(ctx, &workspacev1.ListWorkspacesRequest{})
	if status.Code(err) != codes.Unimplemented {
		t.Errorf("the v1 API on the legacy listener: %v, want Unimplemented", err)
	}
	if _, err := healthpb.NewHealthClient(plain).Check(ctx, &healthpb.HealthCheckRequest{}); status.Code(err) != codes.Unimplemented {
		t.Errorf("health on the legacy listener: %v, want Unimplemented", err)
	}
	overTLS, err := grpc.NewClient(api.legacyAddr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{InsecureSkipVerify: true})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = overTLS.Close() })
	short, cancelShort := context.WithTimeout(ctx, 2*time.Second)
	defer cancelShort()
	if _, err := pb.NewCloudIdeServiceClient(overTLS).GetPodSpaceStatus(short, &pb.QueryOption{Name: "portals"}); status.Code(err) != codes.Unavailable && status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("TLS to the legacy listener: %v, want no answer", err)
	}
	toAPI, err := grpc.NewClient(api.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = toAPI.Close() })
	if _, err := pb.NewCloudIdeServiceClient(toAPI).GetPodSpaceStatus(short, &pb.QueryOption{Name: "portals"}); err == nil {
		t.Error("plaintext without a token was answered on the API's own port")
	}
}

// TestAccessWithTheGatewayTrusted: GetAccess hands out the workspace's password, or none when
// the IDEs ask none (--workspace-ide-auth=gateway).
func TestAccessWithTheGatewayTrusted(t *testing.T) {
	ws := &infrav1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{UID: "uid-1"}, Status: infrav1alpha1.WorkspaceStatus{URL: "http://ide"}}
	key := make([]byte, access.KeyBytes)
	for _, trusted := range []bool{false, true} {
		s := &v1Service{w: &workspaces{cfg: &settings{WorkspaceKind: WorkspaceKind{AccessKey: key, GatewayTrusted: trusted}}}}
		if got := s.access(ws); got.GetUrl() != "http://ide" || (got.GetPassword() == "") != trusted {
			t.Errorf("gateway trusted %v: %+v, want the URL and a password only when it is not", trusted, got)
		}
	}
}
