// Command abuse attacks the operator the way hostile tenants and broken clients would, on a
// private embedded (KWOK) cluster on 127.0.0.1, with the operator run as shipped (its 256Mi
// memory limit passed as MEMORY_LIMIT). Each attack is one row of a table: what was tried, the
// answer the attacker got, and the operator's peak RSS meanwhile (the peak is reset before each
// attack). A row fails when the attacker got more than the operator allows or the peak passes
// -max-rss; the run then exits 1. Every loop is bounded in count and time, and the run stops by
// itself within -timeout.
package main

import (
	"context"
	"crypto/x509"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
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
	// shippedMemoryLimit is the Deployment's memory limit (config/manager), which the operator
	// runs under here as it does there.
	shippedMemoryLimit = "256Mi"
)

type options struct {
	users, creates, watches, flood, workers int
	secrets, secretKiB                      int
	conns, headerCalls, headerMiB, waits    int
	rotations, giantSpecs                   int
	floodFor, timeout                       time.Duration
	maxRSSMiB                               float64
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
	flag.IntVar(&o.secrets, "secrets", 280, "Secrets a tenant labels as the operator's")
	flag.IntVar(&o.secretKiB, "secret-kib", 900, "size of each labelled Secret, KiB")
	flag.IntVar(&o.conns, "conns", 8000, "TLS connections opened at once that make only the public health call")
	flag.IntVar(&o.headerCalls, "header-calls", 16, "calls with oversized metadata")
	flag.IntVar(&o.headerMiB, "header-mib", 15, "metadata per oversized call, MiB")
	flag.IntVar(&o.waits, "waits", 2000, "concurrent Start(wait=true) calls by one user")
	flag.IntVar(&o.rotations, "rotations", 150, "RotateAccess calls by one user, as fast as answered")
	flag.IntVar(&o.giantSpecs, "giant-specs", 42, "Workspaces with 64 env values of 20 KB each")
	flag.Float64Var(&o.maxRSSMiB, "max-rss", 192, "the operator's peak RSS under any attack, MiB, past which the attack succeeded (the shipped limit is 256Mi)")
	flag.DurationVar(&o.timeout, "timeout", 10*time.Minute, "limit for the whole run")
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
	t.mu.Lock()
	defer t.mu.Unlock()
	var parts []string
	for c, n := range t.counts {
		parts = append(parts, fmt.Sprintf("%s %d", c, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// over says what got through when more than most calls ended with code.
func (t *tally) over(code codes.Code, most int, verb string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if n := t.counts[code]; n > most {
		return fmt.Sprintf("%d %s, over the %d allowed", n, verb, most)
	}
	return ""
}

// none says what got through when no call ended with code.
func (t *tally) none(code codes.Code, through string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.counts[code] == 0 {
		return through
	}
	return ""
}

// other says what got through when calls ended with any code but the one expected.
func (t *tally) other(verb string, allowed ...codes.Code) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for c, k := range t.counts {
		if !slices.Contains(allowed, c) {
			n += k
		}
	}
	if n > 0 {
		return fmt.Sprintf("%d %s otherwise than %v", n, verb, allowed)
	}
	return ""
}

func run(o options) error {
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	// The operator inherits both: a Deployment's container has a high open-file limit, so a
	// low one here would cap connections for the operator rather than the operator itself.
	if err := raiseFileLimit(); err != nil {
		return err
	}
	os.Setenv("MEMORY_LIMIT", shippedMemoryLimit)
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
	defer a.closeConns()
	failed, err := a.attackAll(ctx)
	if err != nil {
		return fmt.Errorf("%w (logs in %s)", err, work)
	}
	if failed > 0 {
		return fmt.Errorf("%d attacks got through (logs in %s)", failed, work)
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
	mu      sync.Mutex
	conns   map[string]*grpc.ClientConn // by who calls on it
	addr    string                      // the API's address
	roots   *x509.CertPool              // the API's CA
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
	a.addr, a.roots = addr, pool
	a.conns = map[string]*grpc.ClientConn{}
	return a, nil
}

func (a *abuse) as(ctx context.Context, token string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
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
