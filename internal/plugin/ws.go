package plugin

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/cloudspace-dev/cloudspace-operator/pkg/workspacev1"
)

// Environment variables the ws commands read when their flags are not given.
const (
	EnvAPI   = "CLOUDSPACE_API"
	EnvToken = "CLOUDSPACE_TOKEN"
)

// wsOptions are how the ws commands reach the workspace API as the caller.
type wsOptions struct {
	*globals
	api, caFile, token, tokenFile, namespace string
	insecure                                 bool
	timeout                                  time.Duration
}

func newWorkspaceCommand(g *globals) *cobra.Command {
	o := &wsOptions{globals: g}
	cmd := &cobra.Command{
		Use:   "ws",
		Short: "Create, list, start, stop and open your workspaces through the workspace API",
		Long: `Your workspaces, through the operator's workspace gRPC API (cloudspace.v1.WorkspaceService),
as the user whose token you give, or your kubeconfig's when you give none (a ServiceAccount's or
an OIDC token the cluster accepts): the API shows and changes only workspaces you own.
Without an API address, "ws start NAME" starts a workspace the operator stopped with your own
Kubernetes rights instead, raising its spec.startRequests in the kubeconfig's namespace.`,
	}
	f := cmd.PersistentFlags()
	f.StringVar(&o.api, "api", os.Getenv(EnvAPI), "the workspace API's address, host:port (env "+EnvAPI+")")
	f.StringVar(&o.token, "api-token", "", "your bearer token for the API (env "+EnvToken+"; prefer --api-token-file)")
	f.StringVar(&o.tokenFile, "api-token-file", "", "a file holding your bearer token for the API")
	f.StringVar(&o.caFile, "api-ca-file", "", "the CA that signed the API's certificate (default: the system's)")
	f.BoolVar(&o.insecure, "api-insecure-skip-tls-verify", false, "do not verify the API's certificate (a self-signed one, in development only)")
	f.StringVar(&o.namespace, "ws-namespace", "", "the workspaces' namespace (default: the API's first)")
	f.DurationVar(&o.timeout, "timeout", 30*time.Second, "how long a call may take (start --wait: how long to wait)")
	cmd.AddCommand(
		o.createCommand(),
		&cobra.Command{Use: "list", Short: "List your workspaces", Args: cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error { return o.list(cmd.Context()) }},
		o.startCommand(),
		&cobra.Command{Use: "stop NAME", Short: "Stop a workspace (its volume is kept)", Args: cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error { return o.stop(cmd.Context(), args[0]) }},
		o.openCommand(),
	)
	return cmd
}

func (o *wsOptions) startCommand() *cobra.Command {
	var wait bool
	cmd := &cobra.Command{Use: "start NAME", Short: "Start a stopped workspace (without --api: with your Kubernetes rights)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.api == "" {
				return o.startWithKubernetesRights(cmd.Context(), args[0])
			}
			return o.start(cmd.Context(), args[0], wait)
		}}
	cmd.Flags().BoolVar(&wait, "wait", false, "wait until the IDE is running (within --timeout)")
	return cmd
}

func (o *wsOptions) createCommand() *cobra.Command {
	var (
		ws   workspacev1.Workspace
		wait bool
	)
	cmd := &cobra.Command{Use: "create NAME", Short: "Create a workspace, running; the API's defaults fill what is not given", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ws.Name, ws.Namespace = args[0], o.namespace
			return o.printOne(cmd.Context(), func(ctx context.Context, c workspacev1.WorkspaceServiceClient) (*workspacev1.Workspace, error) {
				return c.Create(ctx, &workspacev1.CreateWorkspaceRequest{Workspace: &ws, Wait: wait})
			})
		}}
	f := cmd.Flags()
	f.StringVar(&ws.Image, "image", "", "the IDE's image")
	f.StringVar(&ws.Cpu, "cpu", "", "the IDE's CPU limit, e.g. 2 or 500m")
	f.StringVar(&ws.Memory, "memory", "", "the IDE's memory limit, e.g. 4Gi")
	f.StringVar(&ws.Storage, "storage", "", "the size of the workspace's volume, e.g. 10Gi")
	f.StringVar(&ws.GitUrl, "git-url", "", "a repository cloned into the volume on first start (https)")
	f.BoolVar(&ws.RetainStorage, "retain-storage", false, "keep the volume after the workspace is deleted")
	f.StringVar(&ws.IdleTimeout, "idle-timeout", "", "stop the IDE after it is unused this long, e.g. 30m")
	f.BoolVar(&wait, "wait", false, "wait until the IDE is running (within --timeout)")
	return cmd
}

// workspaceResource is the operator's Workspace.
var workspaceResource = schema.GroupVersionResource{Group: "infra.cloudspace.dev", Version: "v1alpha1", Resource: "workspaces"}

// startWithKubernetesRights starts a workspace the operator stopped by raising its
// spec.startRequests, as a user with Kubernetes rights on it and no API token does.
func (o *wsOptions) startWithKubernetesRights(ctx context.Context, name string) error {
	workspaces, err := o.inNamespace(workspaceResource)
	if err != nil {
		return err
	}
	ws, err := requestStart(ctx, workspaces, "workspace", name, o.stdout)
	if err == nil && !wantsRunning(ws) {
		fmt.Fprintf(o.stdout, "note: its spec.running is false, which keeps it stopped: set it to true to run it\n")
	}
	return err
}

// wantsRunning reports whether a Workspace's spec.running is unset or true.
func wantsRunning(ws *unstructured.Unstructured) bool {
	running, found, _ := unstructured.NestedBool(ws.Object, "spec", "running")
	return running || !found
}

// call connects to the API and runs f with a context that carries the caller's token.
func (o *wsOptions) call(ctx context.Context, f func(context.Context, workspacev1.WorkspaceServiceClient) error) error {
	if o.api == "" {
		return withCode(ExitUsage, "no workspace API address: give --api host:port or set %s", EnvAPI)
	}
	token, err := o.bearer()
	if err != nil {
		return err
	}
	creds, err := o.credentials()
	if err != nil {
		return err
	}
	conn, err := grpc.NewClient(o.api, grpc.WithTransportCredentials(creds))
	if err != nil {
		return withCode(ExitUsage, "--api %q: %w", o.api, err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	return o.apiError(f(ctx, workspacev1.NewWorkspaceServiceClient(conn)))
}

func (o *wsOptions) bearer() (string, error) {
	token := o.token
	if o.tokenFile != "" {
		data, err := os.ReadFile(o.tokenFile)
		if err != nil {
			return "", withCode(ExitUsage, "reading --api-token-file: %w", err)
		}
		token = strings.TrimSpace(string(data))
	}
	if token == "" {
		token = os.Getenv(EnvToken)
	}
	if token == "" {
		token = o.kubeconfigToken()
	}
	if token == "" {
		return "", withCode(ExitUsage, "no API token: give --api-token-file FILE, --api-token, set %s, or use a kubeconfig whose user has a token", EnvToken)
	}
	return token, nil
}

// kubeconfigToken is the bearer token of the kubeconfig's user, "" when it has none (client
// certificates, or a credential plugin, which the API cannot take).
func (o *wsOptions) kubeconfigToken() string {
	cfg, err := o.kube.ToRESTConfig()
	if err != nil {
		return ""
	}
	if cfg.BearerTokenFile != "" {
		if data, err := os.ReadFile(cfg.BearerTokenFile); err == nil {
			return strings.TrimSpace(string(data))
		}
	}
	return cfg.BearerToken
}

func (o *wsOptions) credentials() (credentials.TransportCredentials, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: o.insecure} //nolint:gosec // an explicit development-only flag
	if o.caFile != "" {
		pem, err := os.ReadFile(o.caFile)
		if err != nil {
			return nil, withCode(ExitUsage, "reading --api-ca-file: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, withCode(ExitUsage, "--api-ca-file %s holds no PEM certificate", o.caFile)
		}
	}
	return credentials.NewTLS(cfg), nil
}

// apiError turns the API's status codes into the plugin's exit codes, with what they mean.
func (o *wsOptions) apiError(err error) error {
	if err == nil {
		return nil
	}
	st := status.Convert(err)
	switch st.Code() {
	case codes.Unavailable, codes.DeadlineExceeded:
		return withCode(ExitFailed, "the workspace API at %s did not answer: %s", o.api, st.Message())
	case codes.Unauthenticated:
		return withCode(ExitDenied, "the workspace API refused the token: %s", st.Message())
	case codes.PermissionDenied:
		return withCode(ExitDenied, "%s", st.Message())
	case codes.NotFound:
		return withCode(ExitNotFound, "%s", st.Message())
	}
	return withCode(ExitFailed, "%s: %s", st.Code(), st.Message())
}

func (o *wsOptions) ref(name string) *workspacev1.WorkspaceRef {
	return &workspacev1.WorkspaceRef{Namespace: o.namespace, Name: name}
}

func (o *wsOptions) list(ctx context.Context) error {
	var resp *workspacev1.ListWorkspacesResponse
	err := o.call(ctx, func(ctx context.Context, c workspacev1.WorkspaceServiceClient) error {
		var err error
		resp, err = c.List(ctx, &workspacev1.ListWorkspacesRequest{Namespace: o.namespace})
		return err
	})
	if err != nil {
		return err
	}
	out := resp.GetWorkspaces()
	return o.print(out, func(w *tabwriter.Writer) {
		row(w, "NAMESPACE", "NAME", "PHASE", "RUNNING", "STORAGE", "URL", "IDLE", "IDLE STOP")
		now := time.Now()
		for _, ws := range out {
			row(w, ws.GetNamespace(), ws.GetName(), ws.GetPhase(), ws.GetRunning(), ws.GetStorage(), ws.GetUrl(), idleFor(ws, now), idleColumn(ws))
		}
		fmt.Fprintln(w, storageLine(resp.GetStorage()))
	})
}

// storageLine says what the user's volumes hold against their budget: "storage: 15Gi of 20Gi
// (5Gi kept after delete)".
func storageLine(u *workspacev1.StorageUsage) string {
	line := "storage: " + quantity(u.GetUsedBytes())
	if u.GetBudgetBytes() > 0 {
		line += " of " + quantity(u.GetBudgetBytes())
	}
	return line + " (" + quantity(u.GetKeptBytes()) + " kept after delete)"
}

// quantity is n bytes as a quantity: 10Gi.
func quantity(n int64) string { return resource.NewQuantity(n, resource.BinarySI).String() }

// idleFor is how long a running workspace has not been used ("12m"), as the API knows; "-"
// when it does not run or no use is known.
func idleFor(ws *workspacev1.Workspace, now time.Time) string {
	last, err := time.Parse(time.RFC3339, ws.GetLastUsed())
	if ws.GetPhase() != "Running" || err != nil {
		return "-"
	}
	return duration.HumanDuration(now.Sub(last))
}

// idleColumn says when an unused workspace will be stopped, or that it was: "-" when neither.
func idleColumn(ws *workspacev1.Workspace) string {
	switch {
	case ws.GetIdleStopAt() != "":
		return ws.GetIdleStopAt()
	case ws.GetStoppedReason() != "":
		return "stopped: " + ws.GetStoppedReason()
	}
	return "-"
}

func (o *wsOptions) start(ctx context.Context, name string, wait bool) error {
	return o.printOne(ctx, func(ctx context.Context, c workspacev1.WorkspaceServiceClient) (*workspacev1.Workspace, error) {
		return c.Start(ctx, &workspacev1.StartWorkspaceRequest{Ref: o.ref(name), Wait: wait})
	})
}

func (o *wsOptions) stop(ctx context.Context, name string) error {
	return o.printOne(ctx, func(ctx context.Context, c workspacev1.WorkspaceServiceClient) (*workspacev1.Workspace, error) {
		return c.Stop(ctx, o.ref(name))
	})
}

func (o *wsOptions) printOne(ctx context.Context, f func(context.Context, workspacev1.WorkspaceServiceClient) (*workspacev1.Workspace, error)) error {
	var ws *workspacev1.Workspace
	err := o.call(ctx, func(ctx context.Context, c workspacev1.WorkspaceServiceClient) error {
		var err error
		ws, err = f(ctx, c)
		return err
	})
	if err != nil {
		return err
	}
	return o.print(ws, func(w *tabwriter.Writer) {
		row(w, "NAMESPACE", "NAME", "PHASE", "RUNNING", "MESSAGE")
		row(w, ws.GetNamespace(), ws.GetName(), ws.GetPhase(), ws.GetRunning(), ws.GetMessage())
	})
}
