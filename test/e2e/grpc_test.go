package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/pkg/pb"
	"github.com/cloudspace-dev/cloudspace-operator/pkg/workspacev1"
)

var (
	connOnce sync.Once
	conn     *grpc.ClientConn
	connErr  error
)

// apiConn is one TLS connection to the operator's API, verified against the test CA, shared by
// the tests; it waits until the health service says SERVING.
func apiConn(t *testing.T) *grpc.ClientConn {
	t.Helper()
	connOnce.Do(func() {
		conn, connErr = dialAPI(t, grpcAddr)
	})
	if connErr != nil {
		t.Fatal(connErr)
	}
	return conn
}

// dialAPI connects to an API server at addr with the suite's CA, once it serves.
func dialAPI(t *testing.T, addr string) (*grpc.ClientConn, error) {
	t.Helper()
	pemCA, err := os.ReadFile(grpcTLS.CA)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pemCA)
	creds := credentials.NewTLS(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
	c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		return nil, err
	}
	health := healthpb.NewHealthClient(c)
	waitFor(t, 30*time.Second, "the gRPC health service at "+addr+" says SERVING", func(ctx context.Context) error {
		resp, err := health.Check(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			return err
		}
		if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			return fmt.Errorf("status %s", resp.GetStatus())
		}
		return nil
	})
	return c, nil
}

// as returns a context that calls as the user, with a deadline.
func as(t *testing.T, user string, timeout time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tokens[user])
}

func wantCode(t *testing.T, err error, code codes.Code, msgPart string) {
	t.Helper()
	if status.Code(err) != code || !strings.Contains(status.Convert(err).Message(), msgPart) {
		t.Errorf("error = %v, want %s mentioning %q", err, code, msgPart)
	}
}

// TestLegacyClientCreatesAndWaits uses the client generated from the legacy CloudIdeService's
// service.proto, with a name as the tutorial's web backend makes them: "ws-", its user's and
// its space's ids (24 hex digits each).
func TestLegacyClientCreatesAndWaits(t *testing.T) {
	seed := pb.NewCloudIdeServiceClient(apiConn(t))
	ctx := as(t, "alice", 2*time.Minute)
	name := "ws-63dfc0b1a4e5f6a7b8c9d0e1-63dfc0b1a4e5f6a7b8c9d0e2"
	info, err := seed.CreateSpaceAndWaitForRunning(ctx, &pb.PodInfo{
		Name: name, Namespace: workspaceNS, Image: "mangohow/code-server-go1.19:v0.1", Port: 9999,
		ResourceLimit: &pb.ResourceLimit{Cpu: "1", Memory: "1Gi", Storage: "2Gi"},
	})
	if err != nil {
		t.Fatalf("createSpaceAndWaitForRunning: %v", err)
	}
	if !strings.HasPrefix(info.GetNodeName(), "dev-node-") || info.GetIp() == "" || info.GetPort() != 9999 {
		t.Errorf("space info = %+v, want a fake node, an IP and port 9999", info)
	}
	q := &pb.QueryOption{Name: name, Namespace: workspaceNS}
	st, err := seed.GetPodSpaceStatus(ctx, q)
	if err != nil || st.GetStatus() != 1 || st.GetMessage() != "Running" {
		t.Errorf("getPodSpaceStatus = %+v, %v; want 1/Running", st, err)
	}
	again, err := seed.GetPodSpaceInfo(ctx, q)
	if err != nil || again.GetIp() != info.GetIp() || again.GetNodeName() != info.GetNodeName() {
		t.Errorf("getPodSpaceInfo = %+v, %v; want %+v", again, err, info)
	}
	resp, err := seed.DeleteSpace(ctx, q)
	if err != nil || resp.GetStatus() != 200 {
		t.Fatalf("deleteSpace = %+v, %v", resp, err)
	}
	waitFor(t, time.Minute, "the deleted space is reported absent", func(context.Context) error {
		st, err := seed.GetPodSpaceStatus(ctx, q)
		if err != nil || st.GetStatus() != 0 {
			return fmt.Errorf("status %+v, %v", st, err)
		}
		return nil
	})
}

// TestWorkspaceServiceCalls walks the richer API through every call while a Watch follows, on
// a workspace whose name is as long as a DNS label (63 characters).
func TestWorkspaceServiceCalls(t *testing.T) {
	api := workspacev1.NewWorkspaceServiceClient(apiConn(t))
	ctx := as(t, "bob", 3*time.Minute)
	name := "bob-api-" + strings.Repeat("x", 54) + "1"
	watch, err := api.Watch(ctx, &workspacev1.WatchWorkspacesRequest{Namespace: workspaceNS, Name: name})
	if err != nil {
		t.Fatal(err)
	}
	events := make(chan *workspacev1.WorkspaceEvent, 64)
	go func() {
		for {
			ev, err := watch.Recv()
			if err != nil {
				close(events)
				return
			}
			events <- ev
		}
	}()

	ws, err := api.Create(ctx, &workspacev1.CreateWorkspaceRequest{Wait: true, Workspace: &workspacev1.Workspace{Name: name, Cpu: "500m", Memory: "1Gi"}})
	if err != nil || ws.GetPhase() != "Running" || ws.GetOwner() != "bob" || ws.GetNamespace() != workspaceNS {
		t.Fatalf("Create(wait) = %+v, %v", ws, err)
	}
	ref := &workspacev1.WorkspaceRef{Namespace: workspaceNS, Name: name}
	if got, err := api.Get(ctx, ref); err != nil || got.GetNodeName() == "" || got.GetPodIp() == "" || got.GetCpu() != "500m" {
		t.Errorf("Get = %+v, %v", got, err)
	}
	if list, err := api.List(ctx, &workspacev1.ListWorkspacesRequest{}); err != nil || len(list.GetWorkspaces()) != 1 {
		t.Errorf("List = %+v, %v; want bob's one workspace", list, err)
	}
	if _, err := api.Stop(ctx, ref); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, events, workspacev1.WorkspaceEvent_PHASE_CHANGED, "Stopped")
	if got, err := api.Start(ctx, &workspacev1.StartWorkspaceRequest{Ref: ref, Wait: true}); err != nil || got.GetPhase() != "Running" {
		t.Fatalf("Start(wait) = %+v, %v", got, err)
	}
	if _, err := api.Delete(ctx, ref); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, events, workspacev1.WorkspaceEvent_DELETED, "")
}

// waitEvent reads the watch until an event of the type (and phase, when given) arrives.
func waitEvent(t *testing.T, events <-chan *workspacev1.WorkspaceEvent, typ workspacev1.WorkspaceEvent_Type, phase string) {
	t.Helper()
	deadline := time.After(time.Minute)
	var seen []string
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatalf("watch ended; saw %v", seen)
			}
			seen = append(seen, ev.GetType().String()+"/"+ev.GetWorkspace().GetPhase())
			if ev.GetType() == typ && (phase == "" || ev.GetWorkspace().GetPhase() == phase) {
				return
			}
		case <-deadline:
			t.Fatalf("no %s %s event within a minute; saw %v", typ, phase, seen)
		}
	}
}

func TestAPIRefusesMissingOrWrongTokensAndPlaintext(t *testing.T) {
	api := workspacev1.NewWorkspaceServiceClient(apiConn(t))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := api.List(ctx, &workspacev1.ListWorkspacesRequest{})
	wantCode(t, err, codes.Unauthenticated, "authorization")
	bad := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer tok-alice-4f1d")
	_, err = api.List(bad, &workspacev1.ListWorkspacesRequest{})
	wantCode(t, err, codes.Unauthenticated, "unknown token")

	plain, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	_, err = workspacev1.NewWorkspaceServiceClient(plain).List(as(t, "alice", 5*time.Second), &workspacev1.ListWorkspacesRequest{})
	if status.Code(err) != codes.Unavailable {
		t.Errorf("a plaintext call got %v, want it refused (Unavailable)", err)
	}
}

func TestAnotherUsersWorkspaceIsRefused(t *testing.T) {
	api := workspacev1.NewWorkspaceServiceClient(apiConn(t))
	alice := as(t, "alice", time.Minute)
	if _, err := api.Create(alice, &workspacev1.CreateWorkspaceRequest{Workspace: &workspacev1.Workspace{Name: "alice-private"}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = api.Delete(as(t, "alice", time.Minute), &workspacev1.WorkspaceRef{Name: "alice-private"})
	})
	carol := as(t, "carol", time.Minute)
	ref := &workspacev1.WorkspaceRef{Namespace: workspaceNS, Name: "alice-private"}
	// Another user's workspace answers exactly as a missing one does: its name cannot be probed.
	_, missing := api.Get(carol, &workspacev1.WorkspaceRef{Namespace: workspaceNS, Name: "nobodys"})
	wantCode(t, missing, codes.NotFound, "workspace nobodys not found")
	_, err := api.Get(carol, ref)
	wantCode(t, err, codes.NotFound, "workspace alice-private not found")
	_, err = api.Delete(carol, ref)
	wantCode(t, err, codes.NotFound, "workspace alice-private not found")
	_, err = pb.NewCloudIdeServiceClient(apiConn(t)).DeleteSpace(carol, &pb.QueryOption{Name: "alice-private", Namespace: workspaceNS})
	wantCode(t, err, codes.NotFound, "workspace alice-private not found")
	if list, err := api.List(carol, &workspacev1.ListWorkspacesRequest{}); err != nil || len(list.GetWorkspaces()) != 0 {
		t.Errorf("carol lists %v, %v; want none of alice's", list, err)
	}
}

// TestQuotas: at most 2 running and 3 in all per user (the e2e operator's flags).
func TestQuotas(t *testing.T) {
	api := workspacev1.NewWorkspaceServiceClient(apiConn(t))
	ctx := as(t, "carol", 2*time.Minute)
	create := func(name string) error {
		_, err := api.Create(ctx, &workspacev1.CreateWorkspaceRequest{Workspace: &workspacev1.Workspace{Name: name}})
		if err == nil {
			t.Cleanup(func() { _, _ = api.Delete(as(t, "carol", time.Minute), &workspacev1.WorkspaceRef{Name: name}) })
		}
		return err
	}
	for _, n := range []string{"carol-a", "carol-b"} {
		if err := create(n); err != nil {
			t.Fatal(err)
		}
	}
	wantCode(t, create("carol-c"), codes.ResourceExhausted, "running workspaces")
	if _, err := api.Stop(ctx, &workspacev1.WorkspaceRef{Name: "carol-a"}); err != nil {
		t.Fatal(err)
	}
	// A stopping workspace holds its place until its IDE pod is gone.
	waitFor(t, time.Minute, "carol-a stopped", func(context.Context) error {
		ws, err := api.Get(ctx, &workspacev1.WorkspaceRef{Name: "carol-a"})
		if err != nil {
			return err
		}
		if ws.GetPhase() != "Stopped" {
			return fmt.Errorf("phase %s", ws.GetPhase())
		}
		return nil
	})
	if err := create("carol-c"); err != nil {
		t.Fatalf("with one stopped, a new one must fit: %v", err)
	}
	wantCode(t, create("carol-d"), codes.ResourceExhausted, "3 workspaces")
	_, err := api.Start(ctx, &workspacev1.StartWorkspaceRequest{Ref: &workspacev1.WorkspaceRef{Name: "carol-a"}})
	wantCode(t, err, codes.ResourceExhausted, "running workspaces")
}

func TestInvalidInputNamesTheField(t *testing.T) {
	api := workspacev1.NewWorkspaceServiceClient(apiConn(t))
	seed := pb.NewCloudIdeServiceClient(apiConn(t))
	ctx := as(t, "alice", 30*time.Second)
	cases := []struct {
		ws    *workspacev1.Workspace
		field string
	}{
		{&workspacev1.Workspace{Name: "Bad_Name"}, "workspace.name"},
		{&workspacev1.Workspace{Name: "longer-than-a-dns-label-" + strings.Repeat("x", 40)}, "workspace.name"},
		{&workspacev1.Workspace{Name: "ok", Cpu: "lots"}, "workspace.cpu"},
		{&workspacev1.Workspace{Name: "ok", Port: 80}, "workspace.port"},
		{&workspacev1.Workspace{Name: "ok", Namespace: "kube-system"}, "workspace.namespace"},
		{&workspacev1.Workspace{Name: "ok", GitUrl: "file:///etc/passwd"}, "workspace.git_url"},
	}
	for _, tc := range cases {
		_, err := api.Create(ctx, &workspacev1.CreateWorkspaceRequest{Workspace: tc.ws})
		wantCode(t, err, codes.InvalidArgument, tc.field)
	}
	_, err := seed.CreateSpaceAndWaitForRunning(ctx, &pb.PodInfo{Name: "ok", ResourceLimit: &pb.ResourceLimit{Memory: "-1Gi"}})
	wantCode(t, err, codes.InvalidArgument, "resourceLimit.Memory")
	_, err = api.Get(ctx, &workspacev1.WorkspaceRef{Name: "does-not-exist"})
	wantCode(t, err, codes.NotFound, "does-not-exist")
	if _, err := api.Create(ctx, &workspacev1.CreateWorkspaceRequest{Workspace: &workspacev1.Workspace{Name: "alice-dup"}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = api.Delete(as(t, "alice", time.Minute), &workspacev1.WorkspaceRef{Name: "alice-dup"}) })
	_, err = api.Create(ctx, &workspacev1.CreateWorkspaceRequest{Workspace: &workspacev1.Workspace{Name: "alice-dup"}})
	wantCode(t, err, codes.AlreadyExists, "alice-dup")
}

// TestDeadlineShorterThanStartLeavesNothing: the caller gives up before the IDE is ready.
func TestDeadlineShorterThanStartLeavesNothing(t *testing.T) {
	seed := pb.NewCloudIdeServiceClient(apiConn(t))
	// Shorter than a start here, so that the call ends either while waiting or during the
	// create. KWOK can start a workspace in under 150 ms: one that did is removed, and the call
	// made again with half the time.
	var err error
	for deadline := 150 * time.Millisecond; ; deadline /= 2 {
		_, err = seed.CreateSpaceAndWaitForRunning(as(t, "bob", deadline), &pb.PodInfo{Name: "bob-hasty", Namespace: workspaceNS})
		if err != nil || deadline < 10*time.Millisecond {
			break
		}
		if _, err := seed.DeleteSpace(as(t, "bob", time.Minute), &pb.QueryOption{Name: "bob-hasty", Namespace: workspaceNS}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, time.Minute, "bob-hasty is gone before the next try", func(ctx context.Context) error {
			err := k8sClient.Get(ctx, client.ObjectKey{Namespace: workspaceNS, Name: "bob-hasty"}, &infrav1alpha1.Workspace{})
			if err == nil {
				return fmt.Errorf("bob-hasty is still there")
			}
			return client.IgnoreNotFound(err)
		})
	}
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("error = %v, want DeadlineExceeded", err)
	}
	waitFor(t, time.Minute, "the half-made workspace and its Deployment are gone", func(ctx context.Context) error {
		for _, obj := range []client.Object{&infrav1alpha1.Workspace{}, &appsv1.Deployment{}} {
			err := k8sClient.Get(ctx, client.ObjectKey{Namespace: workspaceNS, Name: "bob-hasty"}, obj)
			if !apierrors.IsNotFound(err) {
				return fmt.Errorf("%T bob-hasty: %v", obj, err)
			}
		}
		return nil
	})
}

func TestHealthAndReflectionNeedNoToken(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := healthpb.NewHealthClient(apiConn(t)).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health = %v, %v", resp, err)
	}
	stream, err := reflectionpb.NewServerReflectionClient(apiConn(t)).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	reply, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range reply.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	joined := strings.Join(names, " ")
	if !strings.Contains(joined, "pb.CloudIdeService") || !strings.Contains(joined, "cloudspace.v1.WorkspaceService") {
		t.Errorf("reflection lists %v", names)
	}
}
