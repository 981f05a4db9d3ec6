package plugin

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"

	"github.com/cloudspace-dev/cloudspace-operator/pkg/workspacev1"
)

// openOptions are ws open's own flags: whether and where to forward a local port to an IDE
// that only has an in-cluster URL.
type openOptions struct {
	forward bool
	address string
	port    int
}

func (o *wsOptions) openCommand() *cobra.Command {
	var oo openOptions
	cmd := &cobra.Command{
		Use:   "open NAME",
		Short: "Print a workspace's URL and password; forward a local port to it when it has no Ingress",
		Long: `Print what it takes to use the IDE: its URL and password, from the workspace API.

A workspace without an Ingress has only an in-cluster URL (http://NAME.NAMESPACE.svc:PORT/),
which no browser outside the cluster resolves. For such a URL, open forwards a local port to
the IDE's pod with your kubeconfig (as kubectl port-forward does), prints the local URL
(URL: http://127.0.0.1:PORT/) and the password, and forwards until interrupted (Ctrl-C).
Browsers treat http://127.0.0.1 as a secure context, so the IDE's web views and clipboard
work without TLS on loopback; listen elsewhere (--address) only knowing the IDE is then
plain http on that network.

The forward needs, in the workspace's namespace: get services, list pods and create
pods/portforward. A URL through an Ingress (https) needs none, and is printed as it is.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return o.open(cmd.Context(), args[0], oo) },
	}
	f := cmd.Flags()
	f.BoolVar(&oo.forward, "forward", true, "forward a local port to an in-cluster URL (false: print the URL as the API gives it)")
	f.StringVar(&oo.address, "address", "127.0.0.1", "the local address to listen on: an IP or localhost")
	f.IntVar(&oo.port, "port", 0, "the local port to listen on (0: a free one)")
	return cmd
}

// validate refuses bad flags before anything is dialled.
func (oo openOptions) validate() error {
	if oo.port < 0 || oo.port > 65535 {
		return withCode(ExitUsage, "--port %d: use 0 (a free port) to 65535", oo.port)
	}
	if !validListenAddress(oo.address) {
		return withCode(ExitUsage, "--address %q: use an IP address or localhost", oo.address)
	}
	return nil
}

// open prints what it takes to use the IDE: where it is, and its password. An in-cluster URL
// is of no use outside the cluster, so for one it forwards a local port and prints that.
func (o *wsOptions) open(ctx context.Context, name string, oo openOptions) error {
	if err := oo.validate(); err != nil {
		return err
	}
	var access *workspacev1.WorkspaceAccess
	err := o.call(ctx, func(ctx context.Context, c workspacev1.WorkspaceServiceClient) error {
		var err error
		access, err = c.GetAccess(ctx, o.ref(name))
		return err
	})
	if err != nil {
		return err
	}
	ref, inCluster := parseServiceURL(access.GetUrl())
	if !oo.forward || !inCluster {
		return o.print(access, func(w *tabwriter.Writer) {
			row(w, "URL:", access.GetUrl())
			row(w, "Password:", access.GetPassword())
			row(w, "Rotation:", fmt.Sprint(access.GetRotation()))
		})
	}
	return o.forwardAndWait(ctx, access, ref, oo)
}

// forwardAndWait forwards a local port to the pod behind the URL's Service as the kubeconfig's
// user, prints where to point the browser, and holds the forward until interrupted.
func (o *wsOptions) forwardAndWait(ctx context.Context, access *workspacev1.WorkspaceAccess, ref serviceRef, oo openOptions) error {
	// Ctrl-C and SIGTERM end the forward cleanly (exit 0) rather than killing the process.
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg, err := o.kube.ToRESTConfig()
	if err != nil {
		return withCode(ExitFailed, "reading your kubeconfig to forward a port to the workspace (--forward=false prints the in-cluster URL alone): %w", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return withCode(ExitFailed, "connecting to the cluster to forward a port to the workspace: %w", err)
	}
	lookup, cancel := context.WithTimeout(ctx, o.timeout)
	target, err := resolveTarget(lookup, cs, ref)
	cancel()
	if err != nil {
		return err
	}
	// A kubelet that never answers the upgrade must not hold the command for ever.
	setup, cancelSetup := context.WithTimeout(ctx, o.timeout)
	fw, err := startForward(setup, cfg, cs, target, oo, o.stderr)
	cancelSetup()
	if err != nil {
		return err
	}
	if err := o.printForwarded(access, fw, localURL(oo.address, fw.local, ref.Path), oo.address); err != nil {
		close(fw.stop)
		return withCode(ExitFailed, "printing the forwarded URL: %w", err)
	}
	return fw.wait(ctx)
}

// openOutput is ws open's -o json|yaml answer when it forwards: the API's access, and the
// local URL that reaches it.
type openOutput struct {
	URL      string        `json:"url"`
	Password string        `json:"password"`
	Rotation int64         `json:"rotation"`
	LocalURL string        `json:"localUrl"`
	Forward  forwardTarget `json:"forward"`
}

// printForwarded prints the local URL and password before the command blocks. Table output is
// "Key: value" lines with one space, written at once and flushed: a script reads the URL line
// off a pipe while the forward keeps running. With -o json|yaml stdout holds the object alone,
// and the note on how long the forward lasts goes to stderr.
func (o *wsOptions) printForwarded(access *workspacev1.WorkspaceAccess, fw *forwarding, local, address string) error {
	t := fw.target
	note := fmt.Sprintf("Forwarding %s to port %d of pod %s/%s until interrupted (Ctrl-C)", net.JoinHostPort(address, fmt.Sprint(fw.local)), t.Port, t.Namespace, t.Pod)
	if o.output != "table" {
		out := openOutput{URL: access.GetUrl(), Password: access.GetPassword(), Rotation: access.GetRotation(), LocalURL: local, Forward: t}
		if err := o.print(out, nil); err != nil {
			return err
		}
		_, err := fmt.Fprintln(o.stderr, note)
		return flush(o.stdout, err)
	}
	_, err := fmt.Fprintf(o.stdout, "URL: %s\nPassword: %s\nRotation: %d\n%s\n", local, access.GetPassword(), access.GetRotation(), note)
	return flush(o.stdout, err)
}

// flush empties a buffered stdout (os.Stdout is not: it writes at once) so that nothing
// printed waits behind the blocking forward.
func flush(w io.Writer, err error) error {
	if f, ok := w.(interface{ Flush() error }); ok && err == nil {
		return f.Flush()
	}
	return err
}
