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
		Short: "List, start, stop and open your workspaces through the workspace API",
		Long: `Your workspaces, through the operator's workspace gRPC API (cloudspace.v1.WorkspaceService),
as the user whose token you give: the API shows and changes only workspaces you own.`,
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
	cmd := &cobra.Command{Use: "start NAME", Short: "Start a stopped workspace", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return o.start(cmd.Context(), args[0], wait) }}
	cmd.Flags().BoolVar(&wait, "wait", false, "wait until the IDE is running (within --timeout)")
	return cmd
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
		return "", withCode(ExitUsage, "no API token: give --api-token-file FILE, --api-token, or set %s", EnvToken)
	}
	return token, nil
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
