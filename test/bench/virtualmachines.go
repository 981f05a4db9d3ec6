package main

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/controllers"
	"github.com/cloudspace-dev/cloudspace-operator/test/framework"
)

const vmNamespace = "bench-vms"

// VMPhase is N VirtualMachines created at once until every one is Running.
type VMPhase struct {
	// Phase is the whole stretch, from the first create call until the last VM ran; its
	// writes per CR are per VirtualMachine, by every writer (operator, scheduler, KWOK, ...).
	Phase
	// CreateToRunning is, for each VM, the time from its create call until its status.phase
	// read Running.
	CreateToRunning Latency `json:"createToRunning"`
	// KVMResource is the extended resource each launcher pod asked for /dev/kvm; empty when
	// the nodes advertise too few of it for every VM at once.
	KVMResource string `json:"kvmResource"`
}

// benchVM is a VirtualMachine on the pod backend, every other field left to the CRD's
// defaults (the bench installs no webhooks; the operator's lifecycle defaults the rest).
func benchVM(i int) *infrav1alpha1.VirtualMachine {
	return &infrav1alpha1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: vmNamespace, Name: fmt.Sprintf("vm-%d", i)},
		Spec:       infrav1alpha1.VirtualMachineSpec{Backend: infrav1alpha1.BackendPod},
	}
}

// virtualMachines starts an operator for the phase, lets it resync what the earlier phases
// left, then creates N VirtualMachines at once and measures until every one is Running.
func (b *bench) virtualMachines(ctx context.Context) (*VMPhase, error) {
	if err := b.serviceRoom(ctx); err != nil {
		return nil, err
	}
	kvm, err := b.kvmResource(ctx)
	if err != nil {
		return nil, err
	}
	if err := b.namespace(ctx, vmNamespace); err != nil {
		return nil, fmt.Errorf("creating namespace %s: %w", vmNamespace, err)
	}
	op, err := b.startOperator(ctx, "operator-vms.log", "--vm-kvm-resource="+kvm)
	if err != nil {
		return nil, err
	}
	defer func() { _ = op.Stop(time.Minute) }()
	// A new operator first reconciles every object it finds: that is the resync phase's work,
	// and counted in this phase it would be charged to the VMs.
	resynced, err := b.resynced(ctx, op)
	if err != nil {
		return nil, err
	}
	if err := b.waitUntil(ctx, resynced); err != nil {
		return nil, fmt.Errorf("waiting for the operator's resync: %w", err)
	}
	fmt.Printf("bench: virtual machines: %d created at once in %s (pod backend, /dev/kvm as %q)\n", b.o.vms, vmNamespace, kvm)
	vp := &VMPhase{KVMResource: kvm}
	vp.Phase, err = b.phaseOver(ctx, op, b.o.vms, func() error {
		var err error
		vp.CreateToRunning, err = b.vmsRunning(ctx)
		return err
	})
	if err != nil {
		return nil, err
	}
	return vp, nil
}

// kvmResource is the extended resource the launcher pods should ask /dev/kvm with: the
// operator's default when the nodes advertise enough of it for every VM at once (hack/
// dev-cluster.sh gives each fake node some), else none, so that the phase measures the
// operator rather than a shortage of fake devices (KWOK boots no guest either way).
func (b *bench) kvmResource(ctx context.Context) (string, error) {
	name := corev1.ResourceName(controllers.DefaultVMConfig().KVMResource)
	if name == "" {
		return "", nil
	}
	var nodes corev1.NodeList
	if err := b.c.List(ctx, &nodes); err != nil {
		return "", fmt.Errorf("listing nodes: %w", err)
	}
	var have int64
	for _, n := range nodes.Items {
		q := n.Status.Allocatable[name]
		have += q.Value()
	}
	if have >= int64(b.o.vms) {
		return string(name), nil
	}
	fmt.Printf("bench: virtual machines: the nodes advertise %d %s for %d VMs; the launchers ask for none\n", have, name, b.o.vms)
	return "", nil
}

// serviceRoom fails early when the cluster's Service range has fewer free addresses than there
// are VMs, each of which has a Service: kwokctl's range is a /24, shared with the workspaces'
// Services, and the VMs past it would wait, without a status, for the phase's timeout while the
// operator retried their Services.
func (b *bench) serviceRoom(ctx context.Context) error {
	var cidrs networkingv1.ServiceCIDRList
	if err := b.c.List(ctx, &cidrs); err != nil {
		return fmt.Errorf("listing ServiceCIDRs: %w", err)
	}
	var used networkingv1.IPAddressList
	if err := b.c.List(ctx, &used); err != nil {
		return fmt.Errorf("listing IPAddresses: %w", err)
	}
	var size float64
	var ranges []string
	for _, c := range cidrs.Items {
		for _, cidr := range c.Spec.CIDRs {
			p, err := netip.ParsePrefix(cidr)
			if err != nil {
				return fmt.Errorf("ServiceCIDR %s: %w", c.Name, err)
			}
			// Less the network and broadcast addresses, which are never allocated.
			size += math.Exp2(float64(p.Addr().BitLen()-p.Bits())) - 2
			ranges = append(ranges, cidr)
		}
	}
	if free := size - float64(len(used.Items)); free < float64(b.o.vms) {
		return fmt.Errorf("the cluster's Service range (%s) has %.0f free addresses for the Services of %d VMs: lower -vms or -workspaces",
			strings.Join(ranges, ", "), free, b.o.vms)
	}
	return nil
}

// resynced returns a condition that holds once op has reconciled as many GenericDaemons and
// Workspaces as there are.
func (b *bench) resynced(ctx context.Context, op *framework.Operator) (wait.ConditionWithContextFunc, error) {
	var gds infrav1alpha1.GenericDaemonList
	if err := b.c.List(ctx, &gds); err != nil {
		return nil, fmt.Errorf("listing GenericDaemons: %w", err)
	}
	var wss infrav1alpha1.WorkspaceList
	if err := b.c.List(ctx, &wss); err != nil {
		return nil, fmt.Errorf("listing Workspaces: %w", err)
	}
	want := map[string]int{genericDaemonController: len(gds.Items), workspaceController: len(wss.Items)}
	return func(ctx context.Context) (bool, error) {
		for controller, n := range want {
			done, err := reconciles(ctx, op, controller)
			if err != nil || done < float64(n) {
				return false, err
			}
		}
		return true, nil
	}, nil
}

// vmsRunning creates the N VirtualMachines at once and returns, for each, the time from its
// create call until its phase read Running. Everything is bounded by the bench's timeout.
func (b *bench) vmsRunning(ctx context.Context) (Latency, error) {
	ctx, cancel := context.WithTimeout(ctx, b.o.timeout)
	defer cancel()
	start := time.Now()
	began := make([]time.Time, b.o.vms)
	var wg sync.WaitGroup
	errs := make(chan error, b.o.vms)
	for i := range b.o.vms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			began[i] = time.Now()
			if err := b.c.Create(ctx, benchVM(i)); err != nil {
				errs <- fmt.Errorf("creating vm-%d: %w", i, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return Latency{}, err
	}
	running := map[string]time.Time{}
	var last []infrav1alpha1.VirtualMachine
	err := b.waitUntil(ctx, func(ctx context.Context) (bool, error) {
		var vms infrav1alpha1.VirtualMachineList
		if err := b.c.List(ctx, &vms, client.InNamespace(vmNamespace)); err != nil {
			return false, err
		}
		last = vms.Items
		for _, vm := range vms.Items {
			if _, seen := running[vm.Name]; !seen && vm.Status.Phase == infrav1alpha1.VMRunning {
				running[vm.Name] = time.Now()
			}
		}
		return len(running) == b.o.vms, nil
	})
	if err != nil {
		return Latency{}, fmt.Errorf("%d of %d VMs Running (the others: %s): %w", len(running), b.o.vms, notRunning(last), err)
	}
	samples := make([]time.Duration, 0, b.o.vms)
	for i := range b.o.vms {
		samples = append(samples, running[fmt.Sprintf("vm-%d", i)].Sub(began[i]))
	}
	return latency(samples, time.Since(start)), nil
}

// notRunning counts the VMs that are not Running by phase, with one's message for each phase,
// so that a phase that timed out says what it was waiting for.
func notRunning(vms []infrav1alpha1.VirtualMachine) string {
	count := map[infrav1alpha1.VirtualMachinePhase]int{}
	example := map[infrav1alpha1.VirtualMachinePhase]string{}
	for _, vm := range vms {
		p := vm.Status.Phase
		if p == infrav1alpha1.VMRunning {
			continue
		}
		count[p]++
		if _, ok := example[p]; !ok {
			example[p] = fmt.Sprintf("%s: %q", vm.Name, vm.Status.Message)
		}
	}
	if len(count) == 0 {
		return "none listed"
	}
	parts := make([]string, 0, len(count))
	for _, p := range slices.Sorted(maps.Keys(count)) {
		name := string(p)
		if p == "" {
			name = "without a status"
		}
		parts = append(parts, fmt.Sprintf("%d %s, e.g. %s", count[p], name, example[p]))
	}
	return strings.Join(parts, "; ")
}

func reportVMs(v *VMPhase) {
	fmt.Printf("\nVirtualMachines: %d created at once (pod backend; /dev/kvm requested as %q)\n\n", v.CreateToRunning.N, v.KVMResource)
	fmt.Printf("%-44s %8s %8s %8s %8s\n", "", "p50 s", "p99 s", "max s", "wall s")
	latencyRow("created → status.phase Running", v.CreateToRunning)
	fmt.Printf("\nwrites per VM: %.2f (%s)\nop CPU-s: %.2f   op peak RSS: %.1f MiB\n",
		v.WritesPerCR, byCause(v.WritesPerCRByCause), v.OperatorCPU, v.OperatorRSSMB)
}

// byCause lists per-cause figures, largest first.
func byCause(m map[string]float64) string {
	names := slices.SortedFunc(maps.Keys(m), func(a, b string) int {
		return cmp.Or(cmp.Compare(m[b], m[a]), strings.Compare(a, b))
	})
	parts := make([]string, 0, len(names))
	for _, r := range names {
		parts = append(parts, fmt.Sprintf("%s %.2f", r, m[r]))
	}
	return strings.Join(parts, ", ")
}
