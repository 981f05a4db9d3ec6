package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/inspect"
	"github.com/cloudspace-dev/cloudspace-operator/test/framework"
)

const (
	opsNamespace = "chaos-ops"
	wsNamespace  = "chaos-workspaces"
	calm, stormy = "chaos-calm", "chaos-stormy"
)

// chaos is one run: the cluster, its clients and the operator the run keeps alive.
type chaos struct {
	o       options
	work    string
	cluster *framework.Cluster
	c       client.Client
	cs      *kubernetes.Clientset
	api     apiSetup
	sup     *supervisor
	report  *Report
}

func newChaos(ctx context.Context, cluster *framework.Cluster, o options, work string) (*chaos, error) {
	c := &chaos{o: o, work: work, cluster: cluster, report: &Report{Demos: o.demos, Daemons: o.daemons, Workspaces: o.workspaces}}
	var err error
	if c.c, err = client.New(cluster.Config, client.Options{Scheme: framework.Scheme()}); err != nil {
		return c, err
	}
	if c.cs, err = kubernetes.NewForConfig(cluster.Config); err != nil {
		return c, err
	}
	testdata := filepath.Join(framework.RepoRoot(), "test", "testdata")
	crds := []string{filepath.Join(framework.RepoRoot(), "config", "crd", "bases"), filepath.Join(testdata, "crds", "demos.yaml")}
	if _, err := envtest.InstallCRDs(cluster.Config, envtest.CRDInstallOptions{Paths: crds, ErrorIfPathMissing: true}); err != nil {
		return c, fmt.Errorf("installing CRDs: %w", err)
	}
	for _, ns := range []string{opsNamespace, wsNamespace, calm, stormy} {
		if err := c.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return c, err
		}
	}
	if c.api, err = setUpAPI(ctx, c.c, work); err != nil {
		return c, err
	}
	c.sup = newSupervisor(o.operator, cluster.Kubeconfig, work, c.operatorArgs(c.api.args...))
	return c, nil
}

// operatorArgs are the flags of every operator the run starts: the shipped kinds and Demo, the
// workspace API, and extra.
func (c *chaos) operatorArgs(extra ...string) []string {
	args := []string{"--watches-file=" + filepath.Join(framework.RepoRoot(), "test", "testdata", "watches.yaml")}
	if c.o.debug {
		args = append(args, "--zap-log-level=debug")
	}
	return append(args, extra...)
}

func (c *chaos) run(ctx context.Context) error {
	if err := c.sup.start(ctx); err != nil {
		return err
	}
	create, change, err := c.undisturbed(ctx)
	if err != nil {
		return err
	}
	c.report.UndisturbedSeconds, c.report.UndisturbedChangeSeconds = create.Seconds(), change.Seconds()
	if err := c.storm(ctx); err != nil {
		return err
	}
	if err := c.checkAfterStorm(ctx); err != nil {
		return err
	}
	if !c.o.leader {
		return nil
	}
	c.sup.stop()
	lr, err := c.leaderElection(ctx)
	c.report.Leader = lr
	return err
}

// undisturbed measures how long the resources take to become Ready with nothing breaking, and
// then to become Ready again after changeAll, the work the storm's last fault lands on; then it
// deletes them.
func (c *chaos) undisturbed(ctx context.Context) (create, change time.Duration, err error) {
	fmt.Printf("chaos: undisturbed: %d Demos and %d GenericDaemons, created and then changed\n", c.o.demos, c.o.daemons)
	start := time.Now()
	if err := c.createResources(ctx, calm); err != nil {
		return 0, 0, err
	}
	if err := c.waitAllReady(ctx, calm); err != nil {
		return 0, 0, err
	}
	create = time.Since(start)
	start = time.Now()
	if err := c.changeAll(ctx, calm); err != nil {
		return 0, 0, err
	}
	if err := c.waitAllReady(ctx, calm); err != nil {
		return 0, 0, err
	}
	return create, time.Since(start), c.deleteAll(ctx, calm)
}

// storm creates the resources while the operator is killed again and again and the control
// plane goes down once in the middle, with workspace API calls under way throughout.
func (c *chaos) storm(ctx context.Context) error {
	fmt.Printf("chaos: storm: %d SIGKILLs and one control-plane outage of %s while reconciling\n", c.o.kills, c.o.outage)
	calls := c.startWorkspaceCalls(ctx)
	created := make(chan error, 1)
	go func() { created <- c.createResources(ctx, stormy) }()
	lastFault, err := c.faults(ctx)
	if err != nil {
		return err
	}
	if err := <-created; err != nil {
		return err
	}
	if err := c.waitAllReady(ctx, stormy); err != nil {
		return err
	}
	after := time.Since(lastFault)
	c.report.ConvergedAfterLastFault = after.Seconds()
	c.report.ConvergenceRatio = after.Seconds() / c.report.UndisturbedChangeSeconds
	c.report.WorkspaceCalls = calls.wait(ctx, c)
	return nil
}

// faults kills the operator at random moments and takes the control plane down once; it
// returns when the last fault ended: the last operator started again, or the control plane
// back with the cluster's own controllers.
func (c *chaos) faults(ctx context.Context) (time.Time, error) {
	var last time.Time
	for i := range c.o.kills {
		pause := c.o.killMin + time.Duration(rand.Int64N(int64(c.o.killMax-c.o.killMin)+1))
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			return last, ctx.Err()
		}
		if i == c.o.kills-1 {
			// The last kill lands on outstanding work, so that what follows it is a recovery
			// and not a wait on resources that were Ready already.
			if err := c.changeAll(ctx, stormy); err != nil {
				return last, err
			}
		}
		last = c.sup.kill(ctx)
		c.report.Kills++
		if i == c.o.kills/2 {
			if err := c.outage(ctx); err != nil {
				return last, err
			}
			last = time.Now()
		}
	}
	return last, nil
}

// outage stops the whole control plane for the configured time and starts it again.
func (c *chaos) outage(ctx context.Context) error {
	start := time.Now()
	if err := c.cluster.StopControlPlane(ctx); err != nil {
		return fmt.Errorf("stopping the control plane: %w", err)
	}
	time.Sleep(c.o.outage)
	if err := c.cluster.StartControlPlane(ctx); err != nil {
		return fmt.Errorf("starting the control plane: %w", err)
	}
	c.report.ControlPlaneOutage = time.Since(start).Seconds()
	return c.waitClusterBack(ctx, start)
}

// waitClusterBack waits until every fake node's lease, and the leader leases of the controller
// manager and the scheduler, were renewed after since. KWOK's controller, started again with a
// new identity, runs no pod until it holds the node leases, and the controller manager rolls
// out no DaemonSet until it leads again (once its old lease expired): their delays would be
// counted against the operator's recovery.
func (c *chaos) waitClusterBack(ctx context.Context, since time.Time) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		var leases []coordinationv1.Lease
		for _, ns := range []string{corev1.NamespaceNodeLease, metav1.NamespaceSystem} {
			list, err := c.cs.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				last = err.Error()
				return false, nil
			}
			for _, l := range list.Items {
				if ns == corev1.NamespaceNodeLease || l.Name == "kube-controller-manager" || l.Name == "kube-scheduler" {
					leases = append(leases, l)
				}
			}
		}
		var stale []string
		for _, l := range leases {
			if l.Spec.RenewTime == nil || !l.Spec.RenewTime.After(since) {
				stale = append(stale, l.Namespace+"/"+l.Name)
			}
		}
		last = fmt.Sprintf("leases not renewed since the outage: %v", stale)
		return len(leases) > 0 && len(stale) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the cluster's own controllers after the outage: %s", last)
	}
	return nil
}

// createResources creates the Demos and GenericDaemons in ns, a few at a time, retrying what
// the API server refuses while it is away.
func (c *chaos) createResources(ctx context.Context, ns string) error {
	var objs []client.Object
	for i := range c.o.demos {
		d := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"greeting": "hi"}}}
		d.SetGroupVersionKind(framework.DemoGVK)
		d.SetNamespace(ns)
		d.SetName(fmt.Sprintf("demo-%d", i))
		objs = append(objs, d)
	}
	for i := range c.o.daemons {
		objs = append(objs, &infrav1alpha1.GenericDaemon{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("gd-%d", i)},
			Spec: infrav1alpha1.GenericDaemonSpec{Image: "busybox:1.36", Label: "logs", Args: []string{"sleep", "infinity"}}})
	}
	return framework.Parallel(8, len(objs), func(i int) error {
		return retryUntil(ctx, func() error { return client.IgnoreAlreadyExists(c.c.Create(ctx, objs[i])) })
	})
}

// changeAll changes the spec of every resource in ns (a new generation each), a few at a time.
func (c *chaos) changeAll(ctx context.Context, ns string) error {
	objs, err := c.resources(ctx, ns)
	if err != nil {
		return fmt.Errorf("listing the resources of %s: %w", ns, err)
	}
	return framework.Parallel(8, len(objs), func(i int) error {
		// Unlike what createResources wrote.
		raw := []byte(`{"spec":{"greeting":"hi again"}}`)
		if objs[i].GetKind() == "GenericDaemon" {
			raw = []byte(`{"spec":{"image":"busybox:1.37"}}`)
		}
		return retryUntil(ctx, func() error {
			return c.c.Patch(ctx, objs[i], client.RawPatch(types.MergePatchType, raw))
		})
	})
}

// resources lists the run's custom resources in ns.
func (c *chaos) resources(ctx context.Context, ns string) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, gvk := range []schema.GroupVersionKind{framework.DemoGVK, infrav1alpha1.GroupVersion.WithKind("GenericDaemon")} {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := c.c.List(ctx, list, client.InNamespace(ns)); err != nil {
			return nil, err
		}
		for i := range list.Items {
			out = append(out, &list.Items[i])
		}
	}
	return out, nil
}

// waitAllReady waits until every resource in ns is Ready for its generation.
func (c *chaos) waitAllReady(ctx context.Context, ns string) error {
	want := c.o.demos + c.o.daemons
	last := ""
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		objs, err := c.resources(ctx, ns)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		ready := 0
		for _, o := range objs {
			if inspect.IsReady(o) {
				ready++
			}
		}
		last = fmt.Sprintf("%d of %d Ready", ready, want)
		return ready == want, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for every resource in %s to be Ready: %s", ns, last)
	}
	return nil
}

// deleteAll deletes the run's resources in ns and waits until they are gone.
func (c *chaos) deleteAll(ctx context.Context, ns string) error {
	for _, gvk := range []schema.GroupVersionKind{framework.DemoGVK, infrav1alpha1.GroupVersion.WithKind("GenericDaemon"), infrav1alpha1.GroupVersion.WithKind("Workspace")} {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		if err := c.c.DeleteAllOf(ctx, u, client.InNamespace(ns)); err != nil {
			return fmt.Errorf("deleting the %ss of %s: %w", gvk.Kind, ns, err)
		}
	}
	return wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		objs, err := c.resources(ctx, ns)
		var ws infrav1alpha1.WorkspaceList
		if err == nil {
			err = c.c.List(ctx, &ws, client.InNamespace(ns))
		}
		return err == nil && len(objs) == 0 && len(ws.Items) == 0, nil
	})
}

// retryUntil calls f until it succeeds or ctx ends, waiting a moment between tries.
func retryUntil(ctx context.Context, f func() error) error {
	for {
		err := f()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %v)", ctx.Err(), err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
