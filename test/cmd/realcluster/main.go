// Command realcluster runs the real cluster (make real-cluster, make real-cluster-down): a
// control plane and real nodes on this machine, in private namespaces (test/infra/realcluster).
//
//	realcluster up         start it (idempotent) with its registry's infra images and OLM
//	realcluster down       stop it and remove everything it made
//	realcluster status     list its processes
//	realcluster snapshot   print the host's state that the cluster must leave as it was
//	realcluster node-stop NODE    kill the node's kubelet and containerd (a lost node)
//	realcluster node-start NODE   start them again and wait until the node is Ready
//	realcluster node-add NODE [LABELS [TAINTS]]   join a new worker (real-worker-N), registered with LABELS (k=v,...) and TAINTS (k=v:Effect,...)
//	realcluster node-remove NODE  take a worker out for good
//
// and, run by the cluster itself: hold DIR (keeps a node's or the fabric's namespaces open),
// forward (127.0.0.1 listeners into the control-plane node), outside ADDR... (the fabric's
// stand-ins for the internet and a metadata service), provision (the volume provisioner).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/cloudspace-dev/cloudspace-operator/test/infra/images"
	"github.com/cloudspace-dev/cloudspace-operator/test/infra/oci"
	"github.com/cloudspace-dev/cloudspace-operator/test/infra/realcluster"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: realcluster up|down|status|snapshot|node-stop|node-start|node-add|node-remove NODE")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, os.Args[1], os.Args[2:]); err != nil {
		fmt.Fprintln(os.Stderr, "real-cluster:", err)
		os.Exit(1)
	}
}

func logf(format string, args ...any) { fmt.Printf("real-cluster: "+format+"\n", args...) }

func run(ctx context.Context, verb string, args []string) error {
	switch verb {
	case "hold":
		<-ctx.Done()
		return nil
	case "forward":
		return forward(ctx, args)
	case "outside":
		return realcluster.Outside(ctx, args)
	case "provision":
		fs := flag.NewFlagSet("provision", flag.ExitOnError)
		kubeconfig := fs.String("kubeconfig", "", "the cluster")
		dir := fs.String("dir", "", "where volumes are made")
		_ = fs.Parse(args)
		return realcluster.Provision(ctx, *kubeconfig, *dir)
	case "snapshot":
		for _, line := range realcluster.HostState() {
			fmt.Println(line)
		}
		return nil
	}
	repo, err := os.Getwd()
	if err != nil {
		return err
	}
	layout, err := realcluster.DefaultLayout(repo)
	if err != nil {
		return err
	}
	switch verb {
	case "up":
		return up(ctx, repo, layout)
	case "down":
		return layout.Down(logf)
	case "status":
		return layout.Status(os.Stdout)
	case "node-stop", "node-start", "node-add", "node-remove":
		return nodeVerb(ctx, layout, verb, args)
	}
	return fmt.Errorf("unknown command %q", verb)
}

func forward(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("forward", flag.ExitOnError)
	holder := fs.Int("holder", 0, "the PID whose network namespace targets are in")
	_ = fs.Parse(args)
	return realcluster.Forward(ctx, realcluster.Dialer{PID: *holder}, fs.Args())
}

// up starts the cluster and, while its nodes start, pushes the images it needs (the pod
// sandbox, CoreDNS, stand-ins of OLM's util and opm images and of scorecard's) to its registry,
// then starts CoreDNS and OLM together.
func up(ctx context.Context, repo string, layout realcluster.Layout) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	return layout.Up(ctx, realcluster.Options{Self: self, Log: logf, Alongside: func(ctx context.Context) error {
		return startInfra(ctx, repo, layout)
	}})
}

// startInfra pushes the infra images and starts CoreDNS and OLM, each as soon as the images it
// names are in the registry; the rest are pushed meanwhile.
func startInfra(ctx context.Context, repo string, layout realcluster.Layout) error {
	start := time.Now()
	push, err := newInfraPusher(ctx, repo, layout)
	if err != nil {
		return err
	}
	crds, err := olmCRDs(repo)
	if err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	dns, err := push(images.PauseRepo, images.CoreDNSRepo)
	if err != nil {
		return err
	}
	g.Go(func() error { return layout.StartDNS(gctx, dns[images.CoreDNSRepo], logf) })
	olm, err := push(images.OLMUtilRepo, images.OPMRepo)
	if err == nil {
		g.Go(func() error {
			return layout.StartOLM(gctx, realcluster.OLM{
				CRDs: crds, UtilImage: olm[images.OLMUtilRepo], OPMImage: olm[images.OPMRepo],
			}, logf)
		})
		_, err = push()
	}
	if err == nil {
		logf("%5.1fs infra images pushed to %s", time.Since(start).Seconds(), layout.Registry())
	}
	return errors.Join(err, g.Wait())
}

// newInfraPusher waits for the registry and returns push, which builds and pushes the infra
// images of the repositories named (with none, those not pushed yet) and returns their
// references by repository.
func newInfraPusher(ctx context.Context, repo string, layout realcluster.Layout) (push func(repos ...string) (map[string]string, error), err error) {
	transport, err := oci.Transport(layout.CA())
	if err != nil {
		return nil, err
	}
	if err := layout.WaitRegistry(ctx, transport); err != nil {
		return nil, err
	}
	b, err := images.NewBuilder(repo, func(string, ...any) {})
	if err != nil {
		return nil, err
	}
	b.Registry = layout.Registry()
	infra, err := images.Select(images.All(""), []images.Set{images.Infra}, nil)
	if err != nil {
		return nil, err
	}
	pushed := map[string]bool{}
	return func(repos ...string) (map[string]string, error) {
		var recipes []images.Recipe
		for _, r := range infra {
			if !pushed[r.Repo] && (len(repos) == 0 || slices.Contains(repos, r.Repo)) {
				recipes = append(recipes, r)
				pushed[r.Repo] = true
			}
		}
		built, err := b.Build(recipes, transport)
		if err != nil {
			return nil, err
		}
		refs := map[string]string{}
		for _, img := range built {
			refs[strings.Split(img.Name, ":")[0]] = img.Ref
		}
		return refs, nil
	}, nil
}

// olmCRDs is the directory of OLM's CRDs in the module the OLM tools are built from.
func olmCRDs(repo string) (string, error) {
	dir, err := images.ModuleDir(filepath.Join(repo, "hack", "tools", "olm"), "github.com/operator-framework/operator-lifecycle-manager")
	return filepath.Join(dir, "deploy", "chart", "crds"), err
}

// nodeVerb loses, brings back, adds or removes one node.
func nodeVerb(ctx context.Context, layout realcluster.Layout, verb string, args []string) error {
	if len(args) < 1 || len(args) > 3 || (len(args) > 1 && verb != "node-add") {
		return fmt.Errorf("usage: realcluster %s NODE%s", verb, map[bool]string{true: " [LABELS [TAINTS]]"}[verb == "node-add"])
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	switch verb {
	case "node-stop":
		return layout.StopNode(args[0])
	case "node-start":
		return layout.StartNode(ctx, self, args[0])
	case "node-add":
		reg := realcluster.Registration{}
		if len(args) > 1 {
			reg.Labels = args[1]
		}
		if len(args) > 2 {
			reg.Taints = args[2]
		}
		return layout.AddNode(ctx, self, args[0], reg)
	}
	return layout.RemoveNode(ctx, args[0])
}
