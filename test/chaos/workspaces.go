package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/pkg/workspacev1"
	"github.com/cloudspace-dev/cloudspace-operator/test/framework"
)

const (
	apiUser, apiToken = "chaos", "chaos-token"
	// callDeadline bounds each create-and-wait; a call may take a moment past it to answer.
	callDeadline, answerGrace = 90 * time.Second, 5 * time.Second
)

// apiSetup is how the operators serve the workspace API in this run.
type apiSetup struct {
	addr string
	tls  framework.TLSFiles
	args []string
}

func setUpAPI(ctx context.Context, c client.Client, work string) (apiSetup, error) {
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: opsNamespace, Name: "api-tokens"}, StringData: map[string]string{apiUser: apiToken}}
	if err := c.Create(ctx, secret); err != nil {
		return apiSetup{}, err
	}
	files, err := framework.NewTLSFiles(work)
	if err != nil {
		return apiSetup{}, err
	}
	port, err := framework.FreePort()
	if err != nil {
		return apiSetup{}, err
	}
	a := apiSetup{addr: fmt.Sprintf("127.0.0.1:%d", port), tls: files}
	a.args = []string{"--grpc-bind-address=" + a.addr, "--grpc-tls-cert-file=" + files.Cert, "--grpc-tls-key-file=" + files.Key,
		"--grpc-token-secret=" + opsNamespace + "/api-tokens", "--workspace-namespaces=" + wsNamespace,
		"--workspace-access-key-secret=" + opsNamespace + "/access-key", "--leader-election-namespace=" + opsNamespace,
		"--quota-max-workspaces=100", "--quota-max-running=100",
		// One token stands for a portal calling for all its users at once.
		"--quota-max-calls-in-flight=200", "--quota-write-burst=100", "--quota-writes-per-minute=6000"}
	return a, nil
}

// dial connects to the workspace API at addr, verifying its certificate.
func (a apiSetup) dial(addr string) (*grpc.ClientConn, error) {
	pem, err := os.ReadFile(a.tls.CA)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	return grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})))
}

func asUser(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+apiToken)
}

// WorkspaceCalls is how the create-and-wait calls made during the faults ended.
type WorkspaceCalls struct {
	ByCode map[string]int `json:"byCode"`
	// Late counts calls that answered after their deadline (and the grace); must be 0.
	Late int `json:"late"`
	// NotRunning counts calls that answered OK for a workspace that was not running; must be 0.
	NotRunning int `json:"okButNotRunning"`
	// VolumesLost counts volumes of successful calls that were gone or replaced at the end.
	VolumesLost int `json:"volumesLost"`
}

func (w WorkspaceCalls) String() string {
	return fmt.Sprintf("%v; late %d, OK but not running %d, volumes lost %d", w.ByCode, w.Late, w.NotRunning, w.VolumesLost)
}

// calls are the create-and-wait calls under way.
type calls struct {
	wg      sync.WaitGroup
	mu      sync.Mutex
	result  WorkspaceCalls
	volumes map[types.NamespacedName]types.UID // of the workspaces whose call succeeded
	err     error
}

// startWorkspaceCalls makes create-and-wait calls spread over the next seconds, each with a
// deadline, and checks each answer as it comes.
func (c *chaos) startWorkspaceCalls(ctx context.Context) *calls {
	cl := &calls{result: WorkspaceCalls{ByCode: map[string]int{}}, volumes: map[types.NamespacedName]types.UID{}}
	conn, err := c.api.dial(c.api.addr)
	if err != nil {
		cl.err = err
		return cl
	}
	api := workspacev1.NewWorkspaceServiceClient(conn)
	for i := range c.o.workspaces {
		cl.wg.Go(func() {
			time.Sleep(time.Duration(i) * 700 * time.Millisecond)
			cl.one(ctx, c, api, fmt.Sprintf("ws-%d", i))
		})
	}
	go func() { cl.wg.Wait(); conn.Close() }()
	return cl
}

// one makes one call and records how it ended.
func (cl *calls) one(ctx context.Context, c *chaos, api workspacev1.WorkspaceServiceClient, name string) {
	callCtx, cancel := context.WithTimeout(asUser(ctx), callDeadline)
	defer cancel()
	start := time.Now()
	ws, err := api.Create(callCtx, &workspacev1.CreateWorkspaceRequest{Workspace: &workspacev1.Workspace{Name: name}, Wait: true})
	took := time.Since(start)
	key := types.NamespacedName{Namespace: wsNamespace, Name: name}
	running := err == nil && cl.runningNow(ctx, c, key)
	cl.mu.Lock()
	defer cl.mu.Unlock()
	cl.result.ByCode[status.Code(err).String()]++
	if took > callDeadline+answerGrace {
		cl.result.Late++
	}
	if err == nil && (ws.GetPhase() != string(infrav1alpha1.WorkspaceRunning) || !running) {
		cl.result.NotRunning++
	}
	if err == nil {
		cl.volumes[key] = cl.volumeUID(ctx, c, key)
	}
}

// runningNow reads the workspace from the API server: Running, with an IDE pod that is ready.
func (cl *calls) runningNow(ctx context.Context, c *chaos, key types.NamespacedName) bool {
	var ws infrav1alpha1.Workspace
	err := retryUntil(ctx, func() error { return c.c.Get(ctx, key, &ws) })
	return err == nil && ws.Status.Phase == infrav1alpha1.WorkspaceRunning
}

func (cl *calls) volumeUID(ctx context.Context, c *chaos, key types.NamespacedName) types.UID {
	var pvc corev1.PersistentVolumeClaim
	_ = retryUntil(ctx, func() error {
		return c.c.Get(ctx, types.NamespacedName{Namespace: key.Namespace, Name: key.Name + "-home"}, &pvc)
	})
	return pvc.UID
}

// wait waits for every call, and checks that the volumes of those that succeeded are still
// the same volumes.
func (cl *calls) wait(ctx context.Context, c *chaos) WorkspaceCalls {
	cl.wg.Wait()
	if cl.err != nil {
		cl.result.ByCode["dial: "+cl.err.Error()]++
	}
	for key, uid := range cl.volumes {
		var pvc corev1.PersistentVolumeClaim
		err := c.c.Get(ctx, types.NamespacedName{Namespace: key.Namespace, Name: key.Name + "-home"}, &pvc)
		if err != nil || pvc.UID != uid || uid == "" {
			cl.result.VolumesLost++
		}
	}
	return cl.result
}
