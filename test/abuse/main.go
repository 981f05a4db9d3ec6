// Command abuse attacks the workspace API the way hostile or broken clients would, against the
// operator on a private embedded (KWOK) cluster on 127.0.0.1: N users with real tokens firing
// creates over their quota, opening more Watch streams than allowed, and a flood of calls with
// wrong tokens. Every loop is bounded in count and time, and the run stops by itself. It prints
// what was refused with which code, the operator's peak RSS, and the API server's requests
// during the token flood (a flood must not turn into reads of the token Secret).
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/cloudspace-dev/cloudspace-operator/pkg/workspacev1"
	"github.com/cloudspace-dev/cloudspace-operator/test/framework"
)

const (
	operatorNS  = "abuse-system"
	workspaceNS = "abuse-workspaces"
	tokenSecret = "tokens"
	maxRunning  = 2
	maxWatches  = 4
)

type options struct {
	users, creates, watches, flood, workers int
	floodFor, timeout                       time.Duration
	operator                                string
}

func main() {
	var o options
	flag.IntVar(&o.users, "users", 10, "API users, each with a real token")
	flag.IntVar(&o.creates, "creates", 8, "concurrent creates per user (the running quota is 2)")
	flag.IntVar(&o.watches, "watches", 10, "Watch streams each user tries to open (the cap is 4)")
	flag.IntVar(&o.flood, "flood", 20000, "calls with wrong tokens, at most")
	flag.IntVar(&o.workers, "workers", 32, "concurrent callers in the token flood")
	flag.DurationVar(&o.floodFor, "flood-for", 10*time.Second, "longest the token flood may last")
	flag.DurationVar(&o.timeout, "timeout", 5*time.Minute, "limit for the whole run")
	flag.StringVar(&o.operator, "operator", filepath.Join(framework.RepoRoot(), "bin", "manager"), "operator binary")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "abuse:", err)
		os.Exit(1)
	}
}

// tally counts the gRPC codes a phase got back.
type tally struct {
	mu     sync.Mutex
	counts map[codes.Code]int
}

func (t *tally) add(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.counts == nil {
		t.counts = map[codes.Code]int{}
	}
	t.counts[status.Code(err)]++
}

func (t *tally) String() string {
	var parts []string
	for c, n := range t.counts {
		parts = append(parts, fmt.Sprintf("%s %d", c, n))
	}
	sort.Strings(parts)
	return fmt.Sprint(parts)
}

func run(o options) error {
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	work, err := os.MkdirTemp("", "cloudspace-abuse-")
	if err != nil {
		return err
	}
	passed := false
	defer func() { // last, once the operator and the cluster are stopped
		if passed {
			os.RemoveAll(work)
		}
	}()
	fmt.Printf("abuse: starting a private cluster in %s\n", work)
	cluster, err := framework.StartCluster(ctx, filepath.Join(work, "cluster"), fmt.Sprintf("abuse-%d", os.Getpid()))
	if err != nil {
		return err
	}
	defer cluster.Stop()
	a, err := setUp(ctx, cluster, o, work)
	if err != nil {
		return err
	}
	defer a.op.Stop(time.Minute)
	if err := a.attack(ctx); err != nil {
		return fmt.Errorf("%w (logs in %s)", err, work)
	}
	passed = true
	return nil
}

// abuse is one run: the cluster, the operator and a connection to its API.
type abuse struct {
	o       options
	c       client.Client
	kube    *kubernetes.Clientset
	op      *framework.Operator
	conn    *grpc.ClientConn
	tokens  map[string]string
	cluster *framework.Cluster
}

func setUp(ctx context.Context, cluster *framework.Cluster, o options, work string) (*abuse, error) {
	c, err := client.New(cluster.Config, client.Options{Scheme: framework.Scheme()})
	if err != nil {
		return nil, err
	}
	crds := filepath.Join(framework.RepoRoot(), "config", "crd", "bases")
	if _, err := envtest.InstallCRDs(cluster.Config, envtest.CRDInstallOptions{Paths: []string{crds}, ErrorIfPathMissing: true}); err != nil {
		return nil, err
	}
	a := &abuse{o: o, c: c, kube: kubernetes.NewForConfigOrDie(cluster.Config), tokens: map[string]string{}, cluster: cluster}
	for i := range o.users {
		a.tokens[fmt.Sprintf("user%d", i)] = fmt.Sprintf("token-%d-%s", i, "6f0c2d9a")
	}
	for _, ns := range []string{operatorNS, workspaceNS} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return nil, err
		}
	}
	if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNS, Name: tokenSecret}, StringData: a.tokens}); err != nil {
		return nil, err
	}
	tlsFiles, err := framework.NewTLSFiles(work)
	if err != nil {
		return nil, err
	}
	port, err := framework.FreePort()
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	a.op, err = framework.StartOperator(o.operator, cluster.Kubeconfig, filepath.Join(work, "operator.log"),
		"--grpc-bind-address="+addr, "--grpc-tls-cert-file="+tlsFiles.Cert, "--grpc-tls-key-file="+tlsFiles.Key,
		"--grpc-token-secret="+operatorNS+"/"+tokenSecret, "--workspace-namespaces="+workspaceNS,
		"--workspace-access-key-secret="+operatorNS+"/access-key",
		fmt.Sprintf("--quota-max-running=%d", maxRunning), fmt.Sprintf("--quota-max-watches=%d", maxWatches))
	if err != nil {
		return nil, err
	}
	if err := a.op.WaitReady(ctx); err != nil {
		return nil, err
	}
	pemCA, err := os.ReadFile(tlsFiles.CA)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pemCA)
	a.conn, err = grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})))
	return a, err
}

func (a *abuse) as(ctx context.Context, token string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
}

func (a *abuse) attack(ctx context.Context) error {
	api := workspacev1.NewWorkspaceServiceClient(a.conn)
	// The API must be up before anything is counted.
	if err := waitServing(ctx, api, a.as(ctx, a.tokens["user0"])); err != nil {
		return err
	}
	creates := a.createsOverQuota(ctx, api)
	watches := a.watchStreams(ctx, api)
	flood, requests, secretReads, err := a.tokenFlood(ctx, api)
	if err != nil {
		return err
	}
	usage, err := framework.Usage(a.op.PID())
	if err != nil {
		return err
	}
	fmt.Printf("\n%d users, running quota %d, Watch cap %d\n\n", a.o.users, maxRunning, maxWatches)
	fmt.Printf("%-44s %s\n", "concurrent creates over quota", creates.String())
	fmt.Printf("%-44s %s\n", "Watch streams beyond the cap", watches.String())
	fmt.Printf("%-44s %s\n", "calls with wrong tokens", flood.String())
	fmt.Printf("\nAPI server requests during the token flood: %.0f (token Secret reads: %.0f)\n", requests, secretReads)
	fmt.Printf("operator peak RSS: %.1f MiB, CPU: %.2f s\n", usage.PeakRSSMiB, usage.CPUSeconds)
	return nil
}

func waitServing(ctx context.Context, api workspacev1.WorkspaceServiceClient, authed context.Context) error {
	for {
		_, err := api.List(authed, &workspacev1.ListWorkspacesRequest{})
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the API never answered: %w", err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// createsOverQuota has every user fire creates at once, more than the running quota allows.
func (a *abuse) createsOverQuota(ctx context.Context, api workspacev1.WorkspaceServiceClient) *tally {
	t := &tally{}
	var wg sync.WaitGroup
	for user, token := range a.tokens {
		for i := range a.o.creates {
			wg.Add(1)
			go func() {
				defer wg.Done()
				callCtx, cancel := context.WithTimeout(a.as(ctx, token), 30*time.Second)
				defer cancel()
				_, err := api.Create(callCtx, &workspacev1.CreateWorkspaceRequest{Workspace: &workspacev1.Workspace{Name: fmt.Sprintf("%s-%d", user, i)}})
				t.add(err)
			}()
		}
	}
	wg.Wait()
	return t
}

// watchStreams has every user open more Watch streams than the cap, then closes them all.
func (a *abuse) watchStreams(ctx context.Context, api workspacev1.WorkspaceServiceClient) *tally {
	t := &tally{}
	streamCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	for _, token := range a.tokens {
		for range a.o.watches {
			stream, err := api.Watch(a.as(streamCtx, token), &workspacev1.WatchWorkspacesRequest{})
			if err == nil {
				err = firstAnswer(stream)
			}
			t.add(err)
		}
	}
	return t
}

// firstAnswer waits for a stream's first message or error; a stream quiet for two seconds was
// accepted (a user with no workspaces gets no event), so no stream can hold the run.
func firstAnswer(stream workspacev1.WorkspaceService_WatchClient) error {
	done := make(chan error, 1)
	go func() {
		_, err := stream.Recv()
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(2 * time.Second):
		return nil
	}
}

// tokenFlood calls with wrong tokens from many workers, bounded in count and time, and counts
// the API server's requests meanwhile.
func (a *abuse) tokenFlood(ctx context.Context, api workspacev1.WorkspaceServiceClient) (*tally, float64, float64, error) {
	before, err := a.apiRequests(ctx)
	if err != nil {
		return nil, 0, 0, err
	}
	floodCtx, cancel := context.WithTimeout(ctx, a.o.floodFor)
	defer cancel()
	t := &tally{}
	calls := make(chan int, a.o.flood)
	for i := range a.o.flood {
		calls <- i
	}
	close(calls)
	var wg sync.WaitGroup
	for range a.o.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range calls {
				if floodCtx.Err() != nil {
					return
				}
				_, err := api.List(a.as(floodCtx, fmt.Sprintf("wrong-%d", i)), &workspacev1.ListWorkspacesRequest{})
				t.add(err)
			}
		}()
	}
	wg.Wait()
	after, err := a.apiRequests(ctx)
	if err != nil {
		return nil, 0, 0, err
	}
	return t, framework.Sum(after) - framework.Sum(before), after["secrets"] - before["secrets"], nil
}

// apiRequests reads the API server's request counter, by resource.
func (a *abuse) apiRequests(ctx context.Context) (map[string]float64, error) {
	raw, err := a.kube.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, err
	}
	return framework.SumCounter(raw, "apiserver_request_total", func(labels map[string]string) (string, bool) {
		return labels["resource"], true
	})
}
