// Package plugin is kubectl-cloudspace, the operator's kubectl plugin: which kinds the operator
// serves and how many of each are ready (kinds), what one resource made and why it is not ready
// (tree), the caller's own workspaces through the workspace gRPC API (ws), and the start of a
// VirtualMachine the operator stopped (vm). kinds and tree
// use discovery and the dynamic client only, so they work for every kind the operator serves,
// pure chart kinds included.
package plugin

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"
)

// Exit codes, for scripts.
const (
	// ExitOK: done; for tree, the resource and every child are ready.
	ExitOK = 0
	// ExitFailed: the cluster or the workspace API could not be reached, or refused the call.
	ExitFailed = 1
	// ExitUsage: an unknown command, flag or kind, or missing arguments.
	ExitUsage = 2
	// ExitNotReady: tree found the resource, or one of its children, not ready.
	ExitNotReady = 3
	// ExitNotInstalled: the cluster serves none of the operator's kinds (the CRDs are not installed).
	ExitNotInstalled = 4
	// ExitNotFound: the resource or workspace does not exist.
	ExitNotFound = 5
	// ExitDenied: the workspace API refused the token, or the workspace is another user's, or
	// the cluster refused a right ws open's port-forward needs.
	ExitDenied = 6
)

// exitError carries the exit code an error ends the plugin with.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func withCode(code int, format string, args ...any) error {
	return &exitError{code: code, err: fmt.Errorf(format, args...)}
}

// Main runs the plugin with args (without the program name) and returns its exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	// client-go logs what it also returns (an unreachable cluster, say): say it once, below.
	klog.SetLogger(logr.Discard())
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return ExitOK
	}
	var ee *exitError
	if !errors.As(err, &ee) {
		// cobra's own errors: unknown commands and flags, wrong argument counts.
		fmt.Fprintf(stderr, "error: %v\nSee 'kubectl cloudspace --help'.\n", err)
		return ExitUsage
	}
	if ee.code != ExitNotReady {
		fmt.Fprintf(stderr, "error: %v\n", ee.err)
	}
	return ee.code
}

// globals are the flags every command has.
type globals struct {
	kube   *genericclioptions.ConfigFlags
	output string
	stdout io.Writer
	// stderr takes what must stay out of stdout while it is parsed, e.g. ws open's note
	// that it keeps forwarding.
	stderr io.Writer
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	g := &globals{kube: genericclioptions.NewConfigFlags(true), stdout: stdout, stderr: stderr}
	root := &cobra.Command{
		Use:   "kubectl-cloudspace",
		Short: "See what the Cloudspace operator serves and made, and use your workspaces",
		Long: `kubectl cloudspace: the Cloudspace operator's kubectl plugin.

  kubectl cloudspace kinds                  the kinds the operator serves, with counts by readiness
  kubectl cloudspace tree KIND NAME         a resource, its children and why one is not ready
  kubectl cloudspace ws list|start|stop|open your workspaces, through the workspace API
  kubectl cloudspace ws open NAME           its URL and password; without an Ingress, forwards
                                            a local port to it (http://127.0.0.1:PORT/)
  kubectl cloudspace vm start NAME          boot a VirtualMachine the operator stopped

Exit codes: 0 done, 1 failed (unreachable, refused), 2 bad usage, 3 not ready (tree),
4 the operator's CRDs are not installed, 5 not found, 6 refused: the token, not your
workspace, or a Kubernetes right ws open's port-forward needs.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(*cobra.Command, []string) error {
			switch g.output {
			case "table", "json", "yaml":
				return nil
			}
			return withCode(ExitUsage, "-o %q: use table, json or yaml", g.output)
		},
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	g.kube.AddFlags(root.PersistentFlags())
	root.PersistentFlags().StringVarP(&g.output, "output", "o", "table", "output format: table, json or yaml")
	root.AddCommand(newKindsCommand(g), newTreeCommand(g), newWorkspaceCommand(g), newVMCommand(g))
	return root
}

// print writes v as JSON or YAML, or calls table for the table format.
func (g *globals) print(v any, table func(w *tabwriter.Writer)) error {
	switch g.output {
	case "json":
		enc := json.NewEncoder(g.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case "yaml":
		out, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = g.stdout.Write(out)
		return err
	}
	w := tabwriter.NewWriter(g.stdout, 0, 0, 3, ' ', 0)
	table(w)
	return w.Flush()
}

// row writes tab-separated cells as one table line.
func row(w io.Writer, cells ...any) {
	parts := make([]string, len(cells))
	for i, c := range cells {
		parts[i] = fmt.Sprint(c)
	}
	fmt.Fprintln(w, strings.Join(parts, "\t"))
}

// dynamicClient is a dynamic client for the kubeconfig's cluster.
func (g *globals) dynamicClient() (dynamic.Interface, error) {
	cfg, err := g.kube.ToRESTConfig()
	if err != nil {
		return nil, withCode(ExitFailed, "loading the kubeconfig: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, withCode(ExitFailed, "creating a client: %w", err)
	}
	return dyn, nil
}

// inNamespace is a dynamic client of the resource in the kubeconfig's namespace (-n).
func (g *globals) inNamespace(gvr schema.GroupVersionResource) (dynamic.ResourceInterface, error) {
	ns, _, err := g.kube.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, withCode(ExitFailed, "loading the kubeconfig: %w", err)
	}
	dyn, err := g.dynamicClient()
	if err != nil {
		return nil, err
	}
	return dyn.Resource(gvr).Namespace(ns), nil
}
