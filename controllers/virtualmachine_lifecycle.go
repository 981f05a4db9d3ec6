package controllers

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/decode"
	"github.com/cloudspace-dev/cloudspace-operator/internal/engine"
)

// VirtualMachine's resource, what helm-charts/virtualmachine renders (the launcher Pod, or a
// KubeVirt VirtualMachine), and the pods that run the guest.
// +kubebuilder:rbac:groups=infra.cloudspace.dev,resources=virtualmachines,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=infra.cloudspace.dev,resources=virtualmachines/status,verbs=get;patch
// +kubebuilder:rbac:groups=infra.cloudspace.dev,resources=virtualmachines/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=kubevirt.io,resources=virtualmachines,verbs=get;list;watch;create;patch;delete

// VirtualMachineLifecycle is VirtualMachine's Go code: values from the typed spec (defaulted
// and checked as the webhook does), phase, node and address from the guest's pod or KubeVirt's
// VirtualMachine, and the disk kept on delete under Retain.
type VirtualMachineLifecycle struct {
	VMConfig
}

var (
	_ engine.Lifecycle      = VirtualMachineLifecycle{}
	_ engine.StatusReporter = VirtualMachineLifecycle{}
	_ engine.Retainer       = VirtualMachineLifecycle{}
	_ engine.PodObserver    = VirtualMachineLifecycle{}
	_ engine.PodWatcher     = VirtualMachineLifecycle{}
	_ engine.NodeObserver   = VirtualMachineLifecycle{}
	_ engine.Adopter        = VirtualMachineLifecycle{}
)

// ObservesPods asks the engine for the guest's pod.
func (VirtualMachineLifecycle) ObservesPods() {}

// ObservesNodes: a lost node, or a cordoned one holding the volume, says why the pod does not
// run (nodeProblem).
func (VirtualMachineLifecycle) ObservesNodes() {}

func decodeVM(obj *unstructured.Unstructured) (*infrav1alpha1.VirtualMachine, error) {
	vm := &infrav1alpha1.VirtualMachine{}
	if err := decode.FromUnstructured(obj.Object, vm); err != nil {
		return nil, fmt.Errorf("decoding virtual machine: %w", err)
	}
	return vm, nil
}

// Values maps the spec onto helm-charts/virtualmachine's values. The backend once chosen
// (status.backend) is kept: a cluster that gains KubeVirt does not move running VMs.
func (l VirtualMachineLifecycle) Values(obj *unstructured.Unstructured) (map[string]any, error) {
	vm, err := decodeVM(obj)
	if err != nil {
		return nil, err
	}
	l.Default(vm)
	if errs := l.Validate(vm, nil); len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	s := vm.Spec
	cpu, _ := vmCPU(s.CPU)
	userData, _ := cloudInitUserData(s.CloudInit)
	launcherCPU := resource.NewMilliQuantity(cpu*1000, resource.DecimalSI)
	launcherCPU.Add(launcherCPUOverhead)
	launcherMemory := l.launcherMemory(*s.Memory, cpu)
	activity, err := l.activityValues(vm)
	if err != nil {
		return nil, err
	}
	ports := make([]any, 0, len(s.Ports))
	for _, p := range s.Ports {
		ports = append(ports, map[string]any{"name": p.Name, "port": int64(p.Port), "protocol": orDefault(p.Protocol, "TCP")})
	}
	vals := map[string]any{
		"backend":     string(orDefault(vm.Status.Backend, s.Backend)),
		"runStrategy": string(runStrategy(vm)),
		"cpu":         cpu,
		"memory":      s.Memory.String(),
		"image":       s.Image,
		"firmware":    string(s.Firmware),
		"cpuModel":    s.CPUModel,
		"disk":        map[string]any{"size": s.Disk.Size.String(), "storageClassName": deref(s.Disk.StorageClassName)},
		"rootDisk": map[string]any{"persistent": s.RootDisk.Persistence == infrav1alpha1.RootDiskPersistent,
			"size": s.RootDisk.Size.String(), "storageClassName": deref(s.RootDisk.StorageClassName)},
		"hibernate": hibernates(vm),
		"cloudInit": map[string]any{"userData": userData,
			"metaData": fmt.Sprintf("instance-id: %s\nlocal-hostname: %s\n", vm.UID, vm.Name)},
		"ports":                      ports,
		"shutdownGracePeriodSeconds": int64(s.ShutdownGracePeriod.Seconds()),
		"launcher": map[string]any{"image": l.LauncherImage, "cpu": launcherCPU.String(),
			"memory": launcherMemory.String(), "kvmResource": l.KVMResource, "bootDiskLimit": l.BootDiskLimit.String()},
	}
	if activity != nil {
		vals["activity"] = activity
	}
	return vals, nil
}

// hibernates reports whether a stop of vm (defaulted) saves its guest's state: asked for, and
// on the pod backend (the CRD refuses Hibernate with kubevirt, and auto may still choose it).
func hibernates(vm *infrav1alpha1.VirtualMachine) bool {
	return vm.Spec.StopAction == infrav1alpha1.StopHibernate && vm.Spec.RootDisk.Persistence == infrav1alpha1.RootDiskPersistent &&
		orDefault(vm.Status.Backend, vm.Spec.Backend) != infrav1alpha1.BackendKubeVirt
}

// runStrategy is the strategy the VM runs by: its spec's, but Halted while the operator has it
// stopped (status.stoppedReason).
func runStrategy(vm *infrav1alpha1.VirtualMachine) infrav1alpha1.RunStrategy {
	if vm.StoppedByOperator() {
		return infrav1alpha1.RunHalted
	}
	return vm.Spec.RunStrategy
}

// launcherMemory is what the launcher's container may use for a guest of memory and cpus: the
// guest's own plus QEMU's overhead, which depends on whether the guest runs under KVM.
func (l VirtualMachineLifecycle) launcherMemory(memory resource.Quantity, cpus int64) resource.Quantity {
	if l.KVMResource != "" {
		memory.Add(launcherMemoryOverhead)
		return roundUpMi(memory)
	}
	memory.Add(launcherTCGMemoryOverhead)
	perVCPU := launcherTCGVCPUOverhead.DeepCopy()
	perVCPU.Mul(cpus - 1)
	memory.Add(perVCPU)
	return roundUpMi(memory)
}

// Retain keeps the disk when the reclaim policy is Retain.
func (VirtualMachineLifecycle) Retain(obj *unstructured.Unstructured, children []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	policy, _, _ := unstructured.NestedString(obj.Object, "spec", "disk", "reclaimPolicy")
	return volumesToRetain(infrav1alpha1.ReclaimPolicy(policy), children), nil
}

// Adopt lets a VM take over the disk retained from an earlier VM of its name in its namespace:
// VMs have no owner of their own, so the namespace (Kubernetes RBAC) is the tenant boundary.
func (VirtualMachineLifecycle) Adopt(*unstructured.Unstructured, metav1.Object) error {
	return nil
}

// roundUpMi is q in whole MiB, rounded up, so that requests read "2164Mi", not "2268435456".
func roundUpMi(q resource.Quantity) resource.Quantity {
	const mi = 1 << 20
	return *resource.NewQuantity((q.Value()+mi-1)/mi*mi, resource.BinarySI)
}
