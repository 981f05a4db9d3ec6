// Command bench measures the operator on a private embedded (KWOK) cluster: N GenericDaemons
// created through the operator against the same chart objects created directly (the floor), a
// forced resync (an operator restart with nothing changed), an idle steady-state window, the
// workspace API's create-and-wait calls, and VirtualMachines created at once until all run.
// It prints a table and, with -json, writes the figures for run-to-run comparison.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cloudspace-dev/cloudspace-operator/test/framework"
)

type options struct {
	n          int
	workspaces int
	vms        int
	workers    int
	steady     time.Duration
	timeout    time.Duration
	operator   string
	jsonPath   string
	keep       bool
	// scale is the scale phase's sizes, ascending; none for no scale phase.
	scale []int
	// heapProfiles is where the scale phase saves the operator's heap profile at each size.
	heapProfiles string
}

// Report is everything one bench run measured.
type Report struct {
	N        int   `json:"n"`
	Floor    Phase `json:"floor"`
	Operator Phase `json:"operator"`
	Resync   Phase `json:"resync"`
	Steady   Phase `json:"steady"`
	// Times splits the operator phase's GenericDaemons' way to Ready.
	Times       GenericDaemonTimes `json:"genericDaemonTimes"`
	ReadyRatio  float64            `json:"readyRatioToFloor"`
	WritesRatio float64            `json:"writesRatioToFloor"`
	// The workspace API: N concurrent create-and-wait calls against N Deployments made directly.
	PodsFloor   Latency `json:"workspacePodsFloor"`
	VolumeFloor Latency `json:"workspacePodsWithVolumeFloor"`
	// ChildrenFloor makes every kind the workspace chart renders, directly.
	ChildrenFloor Latency `json:"workspaceChildrenFloor"`
	// The floors' costs: their writes and CPU, per workspace.
	VolumeFloorCost   Phase   `json:"workspacePodsWithVolumeFloorCost"`
	ChildrenFloorCost Phase   `json:"workspaceChildrenFloorCost"`
	CreateAndWait     Latency `json:"workspaceCreateAndWait"`
	// CreateWrites is the API writes and CPU of the create-and-wait calls, per workspace.
	CreateWrites Phase `json:"workspaceCreateWrites"`
	// CreateTimeline splits CreateAndWait by what the bench saw happen meanwhile.
	CreateTimeline Timeline `json:"workspaceCreateTimeline"`
	// The ratios are to the floor of the workspace's shape: a pod with a volume.
	CreateP50Ratio float64 `json:"createAndWaitP50RatioToVolumeFloor"`
	CreateP99Ratio float64 `json:"createAndWaitP99RatioToVolumeFloor"`
	// The ratios to the floor that makes every child: what the API and the operator add.
	CreateP50RatioToChildren float64 `json:"createAndWaitP50RatioToChildrenFloor"`
	CreateP99RatioToChildren float64 `json:"createAndWaitP99RatioToChildrenFloor"`
	// VirtualMachines is nil when the run made none (-vms 0).
	VirtualMachines *VMPhase `json:"virtualMachines"`
	// Scale is nil when the run had no scale phase (-scale "").
	Scale *Scale `json:"scale"`
}

// Phase is one measured stretch of the run.
type Phase struct {
	Seconds     float64 `json:"seconds"`
	Writes      float64 `json:"writes"`
	WritesPerCR float64 `json:"writesPerCR"`
	// WritesPerCRByCause splits WritesPerCR by what was written and how: "pods POST",
	// "genericdaemons PATCH" (the finalizer), "genericdaemons/status APPLY".
	WritesPerCRByCause map[string]float64 `json:"writesPerCRByCause,omitempty"`
	OperatorCPU        float64            `json:"operatorCPUSeconds,omitempty"`
	// ClusterCPU is the CPU time of the cluster's own processes (etcd, the API server, the
	// controller manager, the scheduler, KWOK) in the phase; CPUPerCR adds the operator's and
	// divides by the custom resources made: what one costs the machine, everything counted.
	ClusterCPU          float64            `json:"clusterCPUSeconds"`
	ClusterCPUByProcess map[string]float64 `json:"clusterCPUSecondsByProcess"`
	CPUPerCR            float64            `json:"cpuSecondsPerCR"`
	OperatorRSSMB       float64            `json:"operatorPeakRSSMiB,omitempty"`
}

func main() {
	// The scale phase's cache of Demos logs through controller-runtime: nothing of it is wanted.
	ctrllog.SetLogger(logr.Discard())
	var o options
	flag.IntVar(&o.n, "n", 500, "GenericDaemons to create")
	flag.IntVar(&o.workspaces, "workspaces", 100, "concurrent create-and-wait calls (and Deployments for their floor)")
	flag.IntVar(&o.vms, "vms", 100, "VirtualMachines created at once (0: no VirtualMachine phase)")
	flag.IntVar(&o.workers, "workers", 16, "concurrent creators")
	flag.DurationVar(&o.steady, "steady", 30*time.Second, "idle window measured after convergence")
	flag.DurationVar(&o.timeout, "timeout", 10*time.Minute, "limit for each phase")
	flag.StringVar(&o.operator, "operator", filepath.Join(framework.RepoRoot(), "bin", "manager"), "operator binary")
	flag.StringVar(&o.jsonPath, "json", "", "also write the report as JSON to this file")
	flag.BoolVar(&o.keep, "keep", false, "keep the cluster and logs after the run")
	flag.StringVar(&o.heapProfiles, "heap-profiles", "", "save the operator's heap profile at each scale point in this directory")
	sizes := flag.String("scale", "1000,5000,10000", "the scale phase's numbers of Demos, ascending (empty: no scale phase)")
	flag.Parse()
	var err error
	if o.scale, err = parseSizes(*sizes); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	if err = run(o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	work, err := os.MkdirTemp("", "cloudspace-bench-")
	if err != nil {
		return err
	}
	ctx := context.Background()
	fmt.Printf("bench: starting a private cluster in %s\n", work)
	cluster, err := framework.StartCluster(ctx, filepath.Join(work, "cluster"), fmt.Sprintf("bench-%d", os.Getpid()))
	if err != nil {
		return err
	}
	defer func() {
		if !o.keep {
			_ = cluster.Stop()
			_ = os.RemoveAll(work)
		}
	}()
	b, err := newBench(cluster, o, work)
	if err != nil {
		return err
	}
	// A scale phase that fails still leaves the figures measured before it to print.
	rep, err := b.measure(ctx)
	if rep == nil {
		return err
	}
	return errors.Join(report(rep, o.jsonPath), err)
}

type bench struct {
	o        options
	work     string
	cluster  *framework.Cluster
	c        client.Client
	cs       *kubernetes.Clientset
	tls      framework.TLSFiles
	grpcAddr string
	// portalToken is the portal's ServiceAccount's (grpcFlags).
	portalToken string
	grpcArgs    []string
}

func newBench(cluster *framework.Cluster, o options, work string) (*bench, error) {
	c, err := client.New(cluster.Config, client.Options{Scheme: framework.Scheme()})
	if err != nil {
		return nil, err
	}
	crds := filepath.Join(framework.RepoRoot(), "config", "crd", "bases")
	if _, err := envtest.InstallCRDs(cluster.Config, envtest.CRDInstallOptions{Paths: []string{crds}, ErrorIfPathMissing: true}); err != nil {
		return nil, fmt.Errorf("installing CRDs: %w", err)
	}
	return &bench{o: o, work: work, cluster: cluster, c: c, cs: kubernetes.NewForConfigOrDie(cluster.Config)}, nil
}

func (b *bench) measure(ctx context.Context) (*Report, error) {
	rep := &Report{N: b.o.n}
	var err error
	if b.grpcArgs, err = b.grpcFlags(ctx); err != nil {
		return nil, err
	}
	if rep.Floor, err = b.floor(ctx); err != nil {
		return nil, fmt.Errorf("floor: %w", err)
	}
	op, err := b.startOperator(ctx, "operator.log")
	if err != nil {
		return nil, err
	}
	if rep.Operator, err = b.converge(ctx, op); err != nil {
		return nil, fmt.Errorf("operator: %w", err)
	}
	if rep.Times, err = b.genericDaemonTimes(ctx); err != nil {
		return nil, fmt.Errorf("operator: %w", err)
	}
	if rep.Steady, err = b.idle(ctx, op); err != nil {
		return nil, fmt.Errorf("steady state: %w", err)
	}
	if err := op.Stop(time.Minute); err != nil {
		return nil, fmt.Errorf("stopping the operator: %w", err)
	}
	op, err = b.startOperator(ctx, "operator-resync.log")
	if err != nil {
		return nil, err
	}
	defer func() { _ = op.Stop(time.Minute) }()
	if rep.Resync, err = b.resync(ctx, op); err != nil {
		return nil, fmt.Errorf("resync: %w", err)
	}
	if rep.PodsFloor, _, err = b.floorPhase(ctx, wsFloorNamespace, podOnly); err != nil {
		return nil, fmt.Errorf("workspace floor: %w", err)
	}
	if rep.VolumeFloor, rep.VolumeFloorCost, err = b.floorPhase(ctx, wsVolumeNamespace, withVolume); err != nil {
		return nil, fmt.Errorf("workspace floor with volumes: %w", err)
	}
	if rep.ChildrenFloor, rep.ChildrenFloorCost, err = b.floorPhase(ctx, wsChildrenNamespace, allChildren); err != nil {
		return nil, fmt.Errorf("workspace floor with every child: %w", err)
	}
	rep.CreateWrites, err = b.phaseOver(ctx, op, b.o.workspaces, func() (err error) {
		rep.CreateAndWait, rep.CreateTimeline, err = b.createAndWait(ctx)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("workspaces: %w", err)
	}
	rep.ReadyRatio = rep.Operator.Seconds / rep.Floor.Seconds
	rep.WritesRatio = rep.Operator.WritesPerCR / rep.Floor.WritesPerCR
	rep.CreateP50Ratio = rep.CreateAndWait.P50 / rep.VolumeFloor.P50
	rep.CreateP99Ratio = rep.CreateAndWait.P99 / rep.VolumeFloor.P99
	rep.CreateP50RatioToChildren = rep.CreateAndWait.P50 / rep.ChildrenFloor.P50
	rep.CreateP99RatioToChildren = rep.CreateAndWait.P99 / rep.ChildrenFloor.P99
	// The VM and scale phases start operators of their own: the VMs' flags depend on what the
	// nodes offer, and the scale phase's operator serves Demo only.
	if err := op.Stop(time.Minute); err != nil {
		return nil, fmt.Errorf("stopping the operator: %w", err)
	}
	if b.o.vms > 0 {
		if rep.VirtualMachines, err = b.virtualMachines(ctx); err != nil {
			return nil, fmt.Errorf("virtual machines: %w", err)
		}
	}
	if len(b.o.scale) > 0 {
		if rep.Scale, err = b.scale(ctx); err != nil {
			return rep, fmt.Errorf("scale: %w", err)
		}
	}
	return rep, nil
}

func report(r *Report, jsonPath string) error {
	fmt.Printf("\nGenericDaemons: %d on a 3-node KWOK cluster (2 nodes labelled)\n\n", r.N)
	fmt.Printf("%-34s %12s %12s %12s %14s\n", "phase", "seconds", "writes/CR", "op CPU-s", "op peak RSS")
	row := func(name string, p Phase) {
		fmt.Printf("%-34s %12.1f %12.2f %12.2f %11.1f MiB\n", name, p.Seconds, p.WritesPerCR, p.OperatorCPU, p.OperatorRSSMB)
	}
	row("floor: chart objects, no operator", r.Floor)
	row("operator: until all Ready", r.Operator)
	row("forced resync (restart)", r.Resync)
	row(fmt.Sprintf("steady state (%.0fs idle)", r.Steady.Seconds), r.Steady)
	fmt.Printf("\nready time vs floor: %.2fx   writes per CR vs floor: %.2fx\n", r.ReadyRatio, r.WritesRatio)
	fmt.Printf("\n%-44s %8s %8s %8s\n", "each GenericDaemon (whole seconds)", "p50 s", "p99 s", "max s")
	for _, l := range []struct {
		name string
		l    Latency
	}{{"created → Ready", r.Times.CreatedToReady}, {"its DaemonSet created → Ready (the cluster)", r.Times.DaemonSetToReady}} {
		fmt.Printf("%-44s %8.2f %8.2f %8.2f\n", l.name, l.l.P50, l.l.P99, l.l.Max)
	}
	fmt.Printf("writes per GenericDaemon by cause\n  floor:    %s\n  operator: %s\n",
		byCause(r.Floor.WritesPerCRByCause), byCause(r.Operator.WritesPerCRByCause))
	fmt.Printf("\nWorkspaces: %d concurrent calls\n\n%-44s %8s %8s %8s %8s\n", r.CreateAndWait.N, "", "p50 s", "p99 s", "max s", "wall s")
	latencyRow("floor: Deployment created → pod ready", r.PodsFloor)
	latencyRow("floor with a PVC each (the workspace's shape)", r.VolumeFloor)
	latencyRow("floor with every child (+Secret, Service, NP)", r.ChildrenFloor)
	latencyRow("createSpaceAndWaitForRunning (gRPC)", r.CreateAndWait)
	for _, step := range r.CreateTimeline.Steps {
		latencyRow("  "+step.Name, step.Latency)
	}
	fmt.Printf("\ncreate-and-wait vs the floor with a PVC: p50 %.2fx, p99 %.2fx\n", r.CreateP50Ratio, r.CreateP99Ratio)
	fmt.Printf("create-and-wait vs the floor with every child: p50 %.2fx, p99 %.2fx\n", r.CreateP50RatioToChildren, r.CreateP99RatioToChildren)
	fmt.Printf("\n%-44s %12s %16s\n", "per workspace", "writes", "CPU-s (all)")
	for _, c := range []struct {
		name string
		p    Phase
	}{{"floor with a PVC", r.VolumeFloorCost}, {"floor with every child", r.ChildrenFloorCost}, {"createSpaceAndWaitForRunning", r.CreateWrites}} {
		fmt.Printf("%-44s %12.2f %16.3f\n", c.name, c.p.WritesPerCR, c.p.CPUPerCR)
	}
	fmt.Printf("writes per workspace by cause: %s\n", byCause(r.CreateWrites.WritesPerCRByCause))
	if r.VirtualMachines != nil {
		reportVMs(r.VirtualMachines)
	}
	if r.Scale != nil {
		reportScale(r.Scale)
	}
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	fmt.Printf("\n%s\n", data)
	if jsonPath != "" {
		return os.WriteFile(jsonPath, append(data, '\n'), 0o644)
	}
	return nil
}

func latencyRow(name string, l Latency) {
	fmt.Printf("%-44s %8.2f %8.2f %8.2f %8.2f\n", name, l.P50, l.P99, l.Max, l.Seconds)
}
