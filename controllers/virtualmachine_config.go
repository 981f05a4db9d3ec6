package controllers

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/distribution/reference"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/activity"
	"github.com/cloudspace-dev/cloudspace-operator/internal/quantity"
)

// VMConfig is what the operator's flags set for every VirtualMachine: images, /dev/kvm and the
// most one VM may have. The admission webhook and the lifecycle apply the same defaults and
// rules (Default, Validate), so a VM made while the webhook was not installed still never
// renders past them.
type VMConfig struct {
	// DefaultImage is the container disk of a VM that names none: our own small Debian 12
	// cloud-init disk (images/vm-disk), which `make images` builds and every install can mirror.
	DefaultImage string
	// LauncherImage runs QEMU for the pod backend (see images/vm-launcher).
	LauncherImage string
	// KVMResource is the extended resource a device plugin grants /dev/kvm with; empty (the
	// default) runs the guest in software emulation (slow, but needs nothing from the node). The
	// pod backend is chosen where KubeVirt is absent, and with it the device plugin that
	// advertises KubeVirt's resource: asking for that resource by default left every launcher
	// pod unschedulable on a real node.
	KVMResource string
	// MaxCPU, MaxMemory and MaxDisk are the most one VM may have (MaxDisk for each of its
	// volumes: the data disk and the Persistent root disk).
	MaxCPU    int64
	MaxMemory resource.Quantity
	MaxDisk   resource.Quantity
	// BootDiskLimit is the most an Ephemeral root disk's copy in the launcher pod may grow to
	// (the guest writes its root filesystem there); the kubelet evicts a pod beyond it.
	BootDiskLimit resource.Quantity
	// MaxFailedStarts is how many times the launcher may fail (exit with a failure, not the
	// guest's power-off) before the guest first answers, in one start, before the operator
	// stops the VM (status.stoppedReason StartFailed); 0 never stops one.
	// DefaultMaxFailedStarts by the operator's flags.
	MaxFailedStarts int
	// IdleTimeout stops a VM unused this long, its disk kept (status.stoppedReason Idle); 0
	// stops only those whose spec.idleTimeout asks, and a spec may ask for less than
	// IdleTimeout, never more. Pod backend only: KubeVirt's launcher serves no activity.
	IdleTimeout time.Duration
	// IdleWarning is how long before an idle stop status.idleStopAt says it is coming (at most
	// half the timeout). DefaultIdleWarning by the operator's flags.
	IdleWarning time.Duration
	// ActivityInterval is how often each running VM's activity is read, when an idle timeout
	// applies to it; DefaultActivityInterval when 0.
	ActivityInterval time.Duration
	// AccessKey derives each VM's activity credentials (internal/access): the launcher serves
	// its guest's activity over TLS to the operator alone.
	AccessKey []byte
	// Activity is the record of each VM's use that the idle policy reads, written by the
	// operator's probe of the launchers; nil (or no AccessKey): no VM is stopped for being idle.
	Activity *activity.Record
	// Hibernations holds what the launchers report of their hibernations until the VMs'
	// statuses record it (status.hibernation); nil: nothing is recorded.
	Hibernations *HibernationRecord
	// OperatorNamespace is where the operator runs (POD_NAMESPACE): its manager pod, which reads
	// the launchers' activity, is the only one their NetworkPolicy admits to the activity port.
	// Empty: none is.
	OperatorNamespace string
}

// idle is the idle policy for the VM whose use is known as use.
func (c VMConfig) idle(use activity.Use) idlePolicy {
	return idlePolicy{timeout: c.IdleTimeout, warning: c.IdleWarning, interval: c.ActivityInterval, use: use}
}

// DefaultVMConfig is the configuration when the operator's flags set nothing.
func DefaultVMConfig() VMConfig {
	return VMConfig{
		DefaultImage:    "cloudspace/vm-disk:debian-12",
		LauncherImage:   "cloudspace/vm-launcher:0.1.0",
		MaxCPU:          16,
		MaxMemory:       resource.MustParse("64Gi"),
		MaxDisk:         resource.MustParse("500Gi"),
		BootDiskLimit:   resource.MustParse("20Gi"),
		IdleWarning:     DefaultIdleWarning,
		MaxFailedStarts: DefaultMaxFailedStarts,
	}
}

// VM defaults; the CRD carries the same ones (for every field but the image, which is the
// operator's to choose), so a VM is defaulted whether or not the webhook is installed.
const (
	defaultVMCPU         = 1
	defaultVMMemory      = "1Gi"
	defaultVMDisk        = "10Gi"
	defaultVMGracePeriod = 60 * time.Second
)

// Launcher overhead: what QEMU and the launcher need next to the guest's own CPU and memory.
// Software emulation needs more: TCG's translation cache (the launcher bounds it to 128 MiB;
// unbounded it grew to 1 GiB and a 1Gi guest was OOM-killed) and a soft TLB per vCPU come on
// top of QEMU's own. A 1-vCPU 1Gi guest that touched all its memory peaked at 199 MiB beyond
// it; each further vCPU gets its own TLB and translation state.
var (
	launcherCPUOverhead       = resource.MustParse("100m")
	launcherMemoryOverhead    = resource.MustParse("256Mi")
	launcherTCGMemoryOverhead = resource.MustParse("512Mi")
	launcherTCGVCPUOverhead   = resource.MustParse("64Mi")
)

// Default fills every unset field of vm.
func (c VMConfig) Default(vm *infrav1alpha1.VirtualMachine) {
	s := &vm.Spec
	if s.CPU == nil {
		s.CPU = ptr.To(intstr.FromInt32(defaultVMCPU))
	}
	if s.Memory == nil {
		s.Memory = ptr.To(resource.MustParse(defaultVMMemory))
	}
	if s.Image == "" {
		s.Image = c.DefaultImage
	}
	s.RunStrategy = orDefault(s.RunStrategy, infrav1alpha1.RunAlways)
	s.StopAction = orDefault(s.StopAction, infrav1alpha1.StopPowerOff)
	s.Firmware = orDefault(s.Firmware, infrav1alpha1.FirmwareBIOS)
	s.Backend = orDefault(s.Backend, infrav1alpha1.BackendAuto)
	for _, v := range []*infrav1alpha1.VMVolume{&s.Disk.VMVolume, &s.RootDisk.VMVolume} {
		if v.Size == nil {
			v.Size = ptr.To(resource.MustParse(defaultVMDisk))
		}
	}
	s.RootDisk.Persistence = orDefault(s.RootDisk.Persistence, infrav1alpha1.RootDiskPersistent)
	s.Disk.ReclaimPolicy = orDefault(s.Disk.ReclaimPolicy, infrav1alpha1.ReclaimDelete)
	if len(s.Ports) == 0 {
		s.Ports = []infrav1alpha1.VMPort{{Name: "ssh", Port: 22, Protocol: "TCP"}}
	}
	if s.ShutdownGracePeriod == nil {
		s.ShutdownGracePeriod = &metav1.Duration{Duration: defaultVMGracePeriod}
	}
}

// Validate returns what in vm (defaulted) breaks the operator's rules, by field path; old is
// the VM before an update, nil on create. A limit is checked only on a field that changes, so
// an administrator lowering a limit never blocks the other edits of existing VMs.
func (c VMConfig) Validate(vm, old *infrav1alpha1.VirtualMachine) field.ErrorList {
	spec := field.NewPath("spec")
	var errs field.ErrorList
	cpu, err := vmCPU(vm.Spec.CPU)
	if err != nil {
		errs = append(errs, field.Invalid(spec.Child("cpu"), vm.Spec.CPU.String(), err.Error()))
	} else if changed(old, func(o *infrav1alpha1.VirtualMachine) bool { return o.Spec.CPU.String() != vm.Spec.CPU.String() }) && cpu > c.MaxCPU {
		errs = append(errs, field.Invalid(spec.Child("cpu"), cpu, fmt.Sprintf("exceeds the most a VM may have here (%d)", c.MaxCPU)))
	}
	errs = append(errs, c.checkMax(spec.Child("memory"), vm.Spec.Memory, c.MaxMemory, old == nil || !sameQuantity(old.Spec.Memory, vm.Spec.Memory))...)
	errs = append(errs, c.checkMax(spec.Child("disk", "size"), vm.Spec.Disk.Size, c.MaxDisk, old == nil || !sameQuantity(old.Spec.Disk.Size, vm.Spec.Disk.Size))...)
	errs = append(errs, c.checkMax(spec.Child("rootDisk", "size"), vm.Spec.RootDisk.Size, c.MaxDisk, old == nil || !sameQuantity(old.Spec.RootDisk.Size, vm.Spec.RootDisk.Size))...)
	if _, err := reference.ParseNormalizedNamed(vm.Spec.Image); err != nil {
		errs = append(errs, field.Invalid(spec.Child("image"), vm.Spec.Image, "not an image reference: "+err.Error()))
	}
	if _, err := cloudInitUserData(vm.Spec.CloudInit); err != nil {
		errs = append(errs, field.Invalid(spec.Child("cloudInit", "sshAuthorizedKeys"), len(vm.Spec.CloudInit.SSHAuthorizedKeys), err.Error()))
	}
	for i, p := range vm.Spec.Ports {
		if len(p.Name) > maxVMPortName || !vmPortName.MatchString(p.Name) {
			errs = append(errs, field.Invalid(spec.Child("ports").Index(i).Child("name"), p.Name,
				fmt.Sprintf("must be at most %d lower-case letters, digits and '-', starting with a letter", maxVMPortName)))
		}
	}
	return errs
}

// The CRD's rule for a port name, checked here too because the chart writes port names into
// its manifests as they are: any other name could break them, or add fields to them.
var vmPortName = regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?$`)

const maxVMPortName = 15

func changed(old *infrav1alpha1.VirtualMachine, differs func(*infrav1alpha1.VirtualMachine) bool) bool {
	return old == nil || differs(old)
}

// sameQuantity reports whether a and b are equal or both unset. Either may be unset: a stored
// VM is whatever the API server decoded, and Validate may run before Default. One out of range
// counts as a change, so that checkMax refuses it.
func sameQuantity(a, b *resource.Quantity) bool {
	switch {
	case a == nil || b == nil:
		return a == b
	case quantity.OutOfRange(*a) || quantity.OutOfRange(*b):
		return false
	}
	return a.Equal(*b)
}

func (c VMConfig) checkMax(path *field.Path, q *resource.Quantity, maxQ resource.Quantity, isChanged bool) field.ErrorList {
	switch {
	case q == nil || !isChanged:
		return nil
	case quantity.OutOfRange(*q):
		return field.ErrorList{field.Invalid(path, q.String(), "out of range")}
	case q.Cmp(maxQ) > 0:
		return field.ErrorList{field.Invalid(path, q.String(), fmt.Sprintf("exceeds the most a VM may have here (%s)", maxQ.String()))}
	}
	return nil
}

// vmCPU is the VM's CPU count: a positive whole number, written as a number or a string.
func vmCPU(v *intstr.IntOrString) (int64, error) {
	if v == nil {
		return defaultVMCPU, nil
	}
	n := int64(v.IntValue())
	if v.Type == intstr.String && fmt.Sprint(n) != v.StrVal || n <= 0 {
		return 0, fmt.Errorf("must be a positive whole number of CPUs")
	}
	return n, nil
}

// cloudInitUserData is the user data the guest gets: spec.cloudInit.userData, with the SSH
// keys added to it. Keys can be added only to a #cloud-config document (or to none, which
// makes one); a script's keys belong in the script.
func cloudInitUserData(ci *infrav1alpha1.VMCloudInit) (string, error) {
	if ci == nil {
		return "", nil
	}
	if len(ci.SSHAuthorizedKeys) == 0 {
		return ci.UserData, nil
	}
	const header = "#cloud-config"
	doc := map[string]any{}
	if strings.TrimSpace(ci.UserData) != "" {
		if !strings.HasPrefix(ci.UserData, header) {
			return "", fmt.Errorf("keys can be added only to a #cloud-config userData; put them in the userData instead")
		}
		if err := yaml.Unmarshal([]byte(ci.UserData), &doc); err != nil {
			return "", fmt.Errorf("userData is not valid #cloud-config YAML: %w", err)
		}
	}
	keys, _ := doc["ssh_authorized_keys"].([]any)
	for _, k := range ci.SSHAuthorizedKeys {
		keys = append(keys, k)
	}
	doc["ssh_authorized_keys"] = keys
	out, err := yaml.Marshal(doc)
	if err != nil {
		return "", err
	}
	return header + "\n" + string(out), nil
}
