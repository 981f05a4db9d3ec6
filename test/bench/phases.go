package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/controllers"
	"github.com/cloudspace-dev/cloudspace-operator/internal/render"
	"github.com/cloudspace-dev/cloudspace-operator/test/framework"
)

const floorNamespace, operatorNamespace = "bench-floor", "bench-operator"

func benchSpec() infrav1alpha1.GenericDaemonSpec {
	return infrav1alpha1.GenericDaemonSpec{Image: "busybox:1.36", Label: "logs", Args: []string{"sleep", "infinity"}}
}

// floor creates, for each of N names, the objects the chart renders for the bench spec, with no
// operator, and waits until every DaemonSet is ready: the time and writes the cluster itself
// needs. It removes them again (removeNamespace).
func (b *bench) floor(ctx context.Context) (Phase, error) {
	chart, err := render.Load(filepath.Join(framework.RepoRoot(), "helm-charts", "genericdaemon"))
	if err != nil {
		return Phase{}, err
	}
	values, err := valuesFor(benchSpec())
	if err != nil {
		return Phase{}, err
	}
	if err := b.namespace(ctx, floorNamespace); err != nil {
		return Phase{}, err
	}
	fmt.Printf("bench: floor: %d × the chart's objects, created directly\n", b.o.n)
	p, err := b.phase(ctx, nil, func() error {
		err := b.parallel(b.o.n, func(i int) error {
			objs, err := chart.Render(render.Input{Name: fmt.Sprintf("gd-%d", i), Namespace: floorNamespace, Values: values})
			if err != nil {
				return err
			}
			for _, o := range objs {
				if err := b.c.Create(ctx, o); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		return b.waitUntil(ctx, b.daemonSetsReady)
	})
	if err != nil {
		return Phase{}, err
	}
	return p, b.removeNamespace(ctx, floorNamespace)
}

func valuesFor(spec infrav1alpha1.GenericDaemonSpec) (map[string]any, error) {
	gd := &infrav1alpha1.GenericDaemon{Spec: spec}
	u, err := toUnstructured(gd)
	if err != nil {
		return nil, err
	}
	return controllers.GenericDaemonLifecycle{}.Values(u)
}

// converge creates N GenericDaemons and waits until all are Ready.
func (b *bench) converge(ctx context.Context, op *framework.Operator) (Phase, error) {
	if err := b.namespace(ctx, operatorNamespace); err != nil {
		return Phase{}, err
	}
	fmt.Printf("bench: operator: %d GenericDaemons\n", b.o.n)
	return b.phase(ctx, op, func() error {
		err := b.parallel(b.o.n, func(i int) error {
			gd := &infrav1alpha1.GenericDaemon{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: fmt.Sprintf("gd-%d", i)}, Spec: benchSpec()}
			return b.c.Create(ctx, gd)
		})
		if err != nil {
			return err
		}
		return b.waitUntil(ctx, b.genericDaemonsReady)
	})
}

// resync measures a newly started operator over the N unchanged GenericDaemons until it has
// reconciled every one of them.
func (b *bench) resync(ctx context.Context, op *framework.Operator) (Phase, error) {
	fmt.Println("bench: forced resync: a new operator over the unchanged GenericDaemons")
	return b.phase(ctx, op, func() error {
		return b.waitUntil(ctx, func(ctx context.Context) (bool, error) {
			n, err := reconciles(ctx, op, genericDaemonController)
			return n >= float64(b.o.n), err
		})
	})
}

// idle measures the operator with nothing changing.
func (b *bench) idle(ctx context.Context, op *framework.Operator) (Phase, error) {
	fmt.Printf("bench: steady state: %s with nothing changing\n", b.o.steady)
	return b.phase(ctx, op, func() error {
		time.Sleep(b.o.steady)
		return nil
	})
}

// phase runs fn and records its duration, the API writes it caused per GenericDaemon and the
// operator's CPU.
func (b *bench) phase(ctx context.Context, op *framework.Operator, fn func() error) (Phase, error) {
	return b.phaseOver(ctx, op, b.o.n, fn)
}

// phaseOver is phase for a stretch that made crs custom resources: its writes are per one of them.
func (b *bench) phaseOver(ctx context.Context, op *framework.Operator, crs int, fn func() error) (Phase, error) {
	before, err := framework.APIWriteCauses(ctx, b.cs.RESTClient())
	if err != nil {
		return Phase{}, err
	}
	var u0 framework.ProcessUsage
	if op != nil {
		if u0, err = framework.Usage(op.PID()); err != nil {
			return Phase{}, err
		}
	}
	cpu0, err := b.clusterCPU()
	if err != nil {
		return Phase{}, err
	}
	start := time.Now()
	if err := fn(); err != nil {
		return Phase{}, err
	}
	p := Phase{Seconds: time.Since(start).Seconds()}
	cpu1, err := b.clusterCPU()
	if err != nil {
		return Phase{}, err
	}
	p.ClusterCPUByProcess = map[string]float64{}
	for name, used := range cpu1 {
		p.ClusterCPUByProcess[name] = used - cpu0[name]
		p.ClusterCPU += used - cpu0[name]
	}
	after, err := framework.APIWriteCauses(ctx, b.cs.RESTClient())
	if err != nil {
		return Phase{}, err
	}
	p.WritesPerCRByCause = map[string]float64{}
	for cause, n := range after {
		// Leases and node status are the cluster's own heartbeats, not work caused by the phase.
		if d := n - before[cause]; d > 0 && !strings.HasPrefix(cause, "leases ") && !strings.HasPrefix(cause, "nodes/status ") {
			p.Writes += d
			p.WritesPerCRByCause[cause] = d / float64(crs)
		}
	}
	p.WritesPerCR = p.Writes / float64(crs)
	if op != nil {
		u1, err := framework.Usage(op.PID())
		if err != nil {
			return Phase{}, err
		}
		p.OperatorCPU, p.OperatorRSSMB = u1.CPUSeconds-u0.CPUSeconds, u1.PeakRSSMiB
	}
	p.CPUPerCR = (p.ClusterCPU + p.OperatorCPU) / float64(crs)
	return p, nil
}

// clusterCPU is the CPU time each of the cluster's processes has used so far.
func (b *bench) clusterCPU() (map[string]float64, error) {
	pids, err := b.cluster.PIDs()
	if err != nil {
		return nil, err
	}
	used := make(map[string]float64, len(pids))
	for name, pid := range pids {
		u, err := framework.Usage(pid)
		if err != nil {
			return nil, fmt.Errorf("reading the CPU time of %s (%d): %w", name, pid, err)
		}
		used[name] = u.CPUSeconds
	}
	return used, nil
}

// startOperator starts the operator with the bench's flags and extraArgs, and waits until it is ready.
func (b *bench) startOperator(ctx context.Context, logName string, extraArgs ...string) (*framework.Operator, error) {
	port, err := framework.FreePort()
	if err != nil {
		return nil, err
	}
	args := append([]string{fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", port), "--metrics-secure=false"}, b.grpcArgs...)
	args = append(args, extraArgs...)
	op, err := framework.StartOperator(b.o.operator, b.cluster.Kubeconfig, filepath.Join(b.work, logName), args...)
	if err != nil {
		return nil, err
	}
	op.MetricsAddr = fmt.Sprintf("127.0.0.1:%d", port)
	readyCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	return op, op.WaitReady(readyCtx)
}

// Controller names, as the operator's metrics label them (the kind's key).
const (
	genericDaemonController = "genericdaemon.infra.cloudspace.dev"
	workspaceController     = "workspace.infra.cloudspace.dev"
)

// reconciles reads the named controller's reconcile count from the operator's metrics endpoint.
func reconciles(ctx context.Context, op *framework.Operator, controller string) (float64, error) {
	return framework.Reconciles(ctx, op.MetricsAddr, func(labels map[string]string) bool { return labels["controller"] == controller })
}

func (b *bench) daemonSetsReady(ctx context.Context) (bool, error) {
	var list appsv1.DaemonSetList
	if err := b.c.List(ctx, &list, client.InNamespace(floorNamespace)); err != nil {
		return false, err
	}
	ready := 0
	for _, ds := range list.Items {
		s := ds.Status
		if s.ObservedGeneration == ds.Generation && s.DesiredNumberScheduled > 0 && s.NumberReady == s.DesiredNumberScheduled {
			ready++
		}
	}
	return ready == b.o.n, nil
}

func (b *bench) genericDaemonsReady(ctx context.Context) (bool, error) {
	var list infrav1alpha1.GenericDaemonList
	if err := b.c.List(ctx, &list, client.InNamespace(operatorNamespace)); err != nil {
		return false, err
	}
	ready := 0
	for _, gd := range list.Items {
		if meta.IsStatusConditionTrue(gd.Status.Conditions, infrav1alpha1.ConditionReady) && gd.Status.Installed > 0 {
			ready++
		}
	}
	return ready == b.o.n, nil
}

// GenericDaemonTimes splits each GenericDaemon's way to Ready, from the objects' timestamps
// (whole seconds).
type GenericDaemonTimes struct {
	// CreatedToReady is from the GenericDaemon's creation to its Ready condition.
	CreatedToReady Latency `json:"createdToReady"`
	// DaemonSetToReady is from its DaemonSet's creation to that Ready condition: the cluster's
	// part, which the first status may wait for (engine.DefaultFirstStatusDelay) to be written
	// once rather than twice.
	DaemonSetToReady Latency `json:"daemonSetToReady"`
}

// genericDaemonTimes reads the GenericDaemons' and DaemonSets' timestamps once all are Ready.
func (b *bench) genericDaemonTimes(ctx context.Context) (GenericDaemonTimes, error) {
	var gds infrav1alpha1.GenericDaemonList
	var dss appsv1.DaemonSetList
	if err := b.c.List(ctx, &gds, client.InNamespace(operatorNamespace)); err != nil {
		return GenericDaemonTimes{}, err
	}
	if err := b.c.List(ctx, &dss, client.InNamespace(operatorNamespace)); err != nil {
		return GenericDaemonTimes{}, err
	}
	dsCreated := map[string]time.Time{}
	for _, ds := range dss.Items {
		if ref := metav1.GetControllerOf(&ds); ref != nil {
			dsCreated[ref.Name] = ds.CreationTimestamp.Time
		}
	}
	var created, fromDS []time.Duration
	for _, gd := range gds.Items {
		ready := meta.FindStatusCondition(gd.Status.Conditions, infrav1alpha1.ConditionReady)
		ds, ok := dsCreated[gd.Name]
		if ready == nil || !ok {
			return GenericDaemonTimes{}, fmt.Errorf("GenericDaemon %s has no Ready condition or no DaemonSet", gd.Name)
		}
		created = append(created, ready.LastTransitionTime.Sub(gd.CreationTimestamp.Time))
		fromDS = append(fromDS, ready.LastTransitionTime.Sub(ds))
	}
	return GenericDaemonTimes{CreatedToReady: latency(created, 0), DaemonSetToReady: latency(fromDS, 0)}, nil
}

func (b *bench) waitUntil(ctx context.Context, cond wait.ConditionWithContextFunc) error {
	return wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, b.o.timeout, true, cond)
}

func (b *bench) namespace(ctx context.Context, name string) error {
	return b.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
}

// removeNamespace deletes a floor's namespace and waits until it is gone, so that the phase
// compared with that floor runs on a cluster as empty as the floor's was: a floor's DaemonSets
// left in place are resynced by the cluster's controllers at every node update, which slows the
// next phase's rollouts.
func (b *bench) removeNamespace(ctx context.Context, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := b.c.Delete(ctx, ns); err != nil {
		return fmt.Errorf("deleting namespace %s: %w", name, err)
	}
	err := b.waitUntil(ctx, func(ctx context.Context) (bool, error) {
		err := b.c.Get(ctx, client.ObjectKeyFromObject(ns), ns)
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	if err != nil {
		return fmt.Errorf("waiting for namespace %s to go: %w", name, err)
	}
	return nil
}

// parallel runs fn(0..n-1) on the bench's workers and returns the first error.
func (b *bench) parallel(n int, fn func(i int) error) error {
	return framework.Parallel(b.o.workers, n, fn)
}

func toUnstructured(obj any) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: m}, nil
}

// startCache starts a cache of the objects in ns that prepare asks for (informers, handlers),
// and waits until it has synced; stop ends it.
func (b *bench) startCache(ctx context.Context, ns string, prepare func(cache.Cache) error) (cache.Cache, func(), error) {
	c, err := cache.New(b.cluster.Config, cache.Options{Scheme: framework.Scheme(), DefaultNamespaces: map[string]cache.Config{ns: {}}})
	if err != nil {
		return nil, nil, err
	}
	if err := prepare(c); err != nil {
		return nil, nil, err
	}
	cacheCtx, stop := context.WithCancel(ctx)
	go func() { _ = c.Start(cacheCtx) }()
	if !c.WaitForCacheSync(ctx) {
		stop()
		return nil, nil, fmt.Errorf("the bench's cache of %s did not sync", ns)
	}
	return c, stop, nil
}
