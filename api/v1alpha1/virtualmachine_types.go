package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// VirtualMachinePhase is where a virtual machine is in its life.
// +kubebuilder:validation:Enum=Pending;Scheduling;Starting;Running;Stopping;Stopped;Failed
type VirtualMachinePhase string

// VirtualMachine phases.
const (
	// VMPending: accepted; nothing runs yet.
	VMPending VirtualMachinePhase = "Pending"
	// VMScheduling: the VM's pod waits for a node.
	VMScheduling VirtualMachinePhase = "Scheduling"
	// VMStarting: the VM's pod is on a node and the guest is booting.
	VMStarting VirtualMachinePhase = "Starting"
	// VMRunning: the guest runs; status.nodeName and status.ip say where.
	VMRunning VirtualMachinePhase = "Running"
	// VMStopping: the guest was asked to shut down and has spec.shutdownGracePeriod to do so.
	VMStopping VirtualMachinePhase = "Stopping"
	// VMStopped: no guest runs; its volumes are kept (the data disk, and a Persistent root disk).
	VMStopped VirtualMachinePhase = "Stopped"
	// VMFailed: the guest exited with an error and the run strategy does not restart it, or
	// its launcher keeps failing (a crash loop, an image that cannot be pulled); status.message
	// and the Degraded condition say why.
	VMFailed VirtualMachinePhase = "Failed"
)

// RunStrategy says when the VM runs (KubeVirt's names and meanings).
// +kubebuilder:validation:Enum=Always;Halted;RerunOnFailure;Manual
type RunStrategy string

const (
	// RunAlways keeps the VM running: it is restarted whenever it stops, for whatever reason.
	RunAlways RunStrategy = "Always"
	// RunHalted keeps the VM stopped; its volumes are kept.
	RunHalted RunStrategy = "Halted"
	// RunRerunOnFailure restarts the VM when it fails, not when the guest shuts down cleanly.
	RunRerunOnFailure RunStrategy = "RerunOnFailure"
	// RunManual starts the VM once and never restarts it: once it has stopped it stays
	// Stopped until the run strategy changes.
	RunManual RunStrategy = "Manual"
)

// VMBackend runs the VM.
// +kubebuilder:validation:Enum=auto;pod;kubevirt
type VMBackend string

const (
	// BackendAuto picks kubevirt when the cluster serves kubevirt.io/v1 VirtualMachine, else pod;
	// the choice is recorded in status.backend and kept for the VM's life.
	BackendAuto VMBackend = "auto"
	// BackendPod runs QEMU in a pod the operator manages.
	BackendPod VMBackend = "pod"
	// BackendKubeVirt renders a kubevirt.io/v1 VirtualMachine.
	BackendKubeVirt VMBackend = "kubevirt"
)

// VMFirmware is the firmware the guest boots with.
// +kubebuilder:validation:Enum=BIOS;UEFI
type VMFirmware string

const (
	// FirmwareBIOS boots the guest with SeaBIOS (legacy BIOS): most cloud images boot with it.
	FirmwareBIOS VMFirmware = "BIOS"
	// FirmwareUEFI boots the guest with OVMF (UEFI, without Secure Boot), for UEFI-only images.
	// Its variables (boot entries) are kept on the VM's disk volume across restarts.
	FirmwareUEFI VMFirmware = "UEFI"
)

// VMVolume is a disk of the VM held on a PersistentVolumeClaim of its own.
type VMVolume struct {
	// Size of the volume's claim (at most 64 characters); the disk on it takes 95% (the
	// filesystem under it takes its share). It may grow (if the storage class allows) but
	// never shrink.
	// +kubebuilder:default="10Gi"
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).isGreaterThan(quantity('0'))",message="must be a positive quantity"
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).compareTo(quantity('64Ti')) <= 0",message="must be at most 64Ti (the operator may set a lower limit)"
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).compareTo(quantity(string(oldSelf))) >= 0",message="a disk never shrinks"
	// +kubebuilder:validation:XValidation:rule="(type(self) == string ? size(self) : 0) <= 64",message="must be at most 64 characters"
	// +optional
	Size *resource.Quantity `json:"size,omitempty"`
	// StorageClassName of the claim; the cluster's default class when empty.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	StorageClassName *string `json:"storageClassName,omitempty"`
}

// VMDisk is the VM's data disk: the guest's second disk, on a claim kept while the VM is
// stopped.
type VMDisk struct {
	VMVolume `json:",inline"`
	// ReclaimPolicy: Delete (default) removes the VM's volumes (this disk's and a Persistent
	// root disk's) with the VM; Retain keeps them, owned by no one, for a later VM of the same
	// name to adopt.
	// +kubebuilder:default=Delete
	// +optional
	ReclaimPolicy ReclaimPolicy `json:"reclaimPolicy,omitempty"`
}

// RootDiskPersistence says whether what the guest writes to its root disk outlives its start.
// +kubebuilder:validation:Enum=Persistent;Ephemeral
type RootDiskPersistence string

const (
	// RootDiskPersistent imports spec.image once into a volume of the VM's own (the claim
	// <name>-root), and boots from it ever after: the guest's root filesystem (its users' homes,
	// the packages installed) is kept across stops, idle stops, restarts and drains, like
	// KubeVirt's DataVolumes. A later change of spec.image does not touch it.
	RootDiskPersistent RootDiskPersistence = "Persistent"
	// RootDiskEphemeral copies spec.image afresh at every start (KubeVirt's containerDisk):
	// nothing the guest writes to its root disk outlives the start; only spec.disk keeps data.
	RootDiskEphemeral RootDiskPersistence = "Ephemeral"
)

// VMRootDisk is the disk the guest boots from, made from spec.image.
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.persistence) || oldSelf.persistence != 'Persistent' || self.persistence == 'Persistent'",message="a Persistent root disk cannot become Ephemeral: that would delete it, and everything the guest wrote to it"
type VMRootDisk struct {
	// Persistence: Persistent (default), the root disk on a volume of the VM's own, imported
	// once from spec.image and grown to size, never shrunk; or Ephemeral, copied afresh from
	// spec.image at every start. A Persistent root disk cannot become Ephemeral.
	// +kubebuilder:default=Persistent
	// +optional
	Persistence RootDiskPersistence `json:"persistence,omitempty"`
	// Size and StorageClassName are the Persistent root disk's volume's: its disk is grown to
	// 95% of size (an image larger than that is refused), and the guest's cloud-init grows its
	// root filesystem to match.
	VMVolume `json:",inline"`
}

// StopAction is what a stop does to the guest.
// +kubebuilder:validation:Enum=PowerOff;Hibernate
type StopAction string

const (
	// StopPowerOff asks the guest to power off (ACPI) and kills it after
	// spec.shutdownGracePeriod: what ran in it is gone, its disks are kept.
	StopPowerOff StopAction = "PowerOff"
	// StopHibernate pauses the guest and saves its whole state (memory, devices, CPUs: QEMU's
	// migration stream) on the root disk's volume, next to the disk it belongs to; the next start
	// resumes it, so its processes, open files, sessions and uptime carry on. A state that does
	// not match what starts (the disks changed, the launcher or QEMU changed, the CPUs, memory
	// or firmware changed) is discarded, status.hibernation says why, and the guest boots cold.
	// Should saving fail (no room on the volume, the grace period too short), the guest is
	// powered off.
	StopHibernate StopAction = "Hibernate"
)

// VMCloudInit configures the guest at first boot (NoCloud).
type VMCloudInit struct {
	// UserData is the cloud-init user data (for example a #cloud-config document), at most
	// 32768 characters (32 KiB).
	// +kubebuilder:validation:MaxLength=32768
	// +optional
	UserData string `json:"userData,omitempty"`
	// SSHAuthorizedKeys are public keys allowed to log in as the image's default user: at most
	// 32 keys, each at most 4096 characters (an RSA key of 16384 bits is 2.8 KiB) and all
	// together at most 16384 (16 KiB).
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=4096
	// +kubebuilder:validation:XValidation:rule="self.map(k, size(k)).sum() <= 16384",message="all keys together must be at most 16384 characters (16 KiB)"
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.matches('^(ssh-(rsa|ed25519|dss)|ecdsa-sha2-nistp(256|384|521)|sk-(ssh-ed25519|ecdsa-sha2-nistp256)@openssh.com) [A-Za-z0-9+/=]+( [^\\n]*)?$'))",message="each key must be one OpenSSH public key line (ssh-ed25519 AAAA... comment)"
	// +optional
	SSHAuthorizedKeys []string `json:"sshAuthorizedKeys,omitempty"`
}

// VMPort is a port of the guest exposed through the VM's Service.
type VMPort struct {
	// Name of the port, unique in the VM.
	// +kubebuilder:validation:MaxLength=15
	// +kubebuilder:validation:Pattern=`^[a-z]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`
	// Port of the guest.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port"`
	// Protocol: TCP (default) or UDP.
	// +kubebuilder:validation:Enum=TCP;UDP
	// +kubebuilder:default=TCP
	// +optional
	Protocol string `json:"protocol,omitempty"`
}

// VirtualMachineSpec is a virtual machine someone asked for: its CPUs and memory, and what
// running one takes.
// +kubebuilder:validation:XValidation:rule="!has(self.stopAction) || self.stopAction != 'Hibernate' || !has(self.rootDisk) || !has(self.rootDisk.persistence) || self.rootDisk.persistence == 'Persistent'",fieldPath=".stopAction",message="Hibernate needs a Persistent root disk (spec.rootDisk.persistence): the guest's state is saved on its volume, with the disk it belongs to"
// +kubebuilder:validation:XValidation:rule="!has(self.stopAction) || self.stopAction != 'Hibernate' || !has(self.backend) || self.backend != 'kubevirt'",fieldPath=".stopAction",message="Hibernate needs the pod backend (or auto): KubeVirt keeps no guest memory across a stop"
// +kubebuilder:validation:XValidation:rule="!has(self.stopAction) || self.stopAction != 'Hibernate' || !has(self.memory) || !has(self.rootDisk) || !has(self.rootDisk.size) || quantity(string(self.rootDisk.size)).isGreaterThan(quantity(string(self.memory)))",fieldPath=".rootDisk.size",message="must be larger than spec.memory with stopAction Hibernate: the saved state (up to the guest's memory) is kept on the root disk's volume"
type VirtualMachineSpec struct {
	// CPU is the number of virtual CPUs: a positive integer, as a number or a string ("1", as
	// the kubebuilder VirtualMachine sample writes it). Defaulted to 1; at most the operator's --vm-max-cpu.
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:default="1"
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self > 0 : self.matches('^[1-9][0-9]{0,3}$')",message="must be a positive whole number of CPUs"
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self <= 256 : (!self.matches('^[0-9]+$') || int(self) <= 256)",message="must be at most 256 (the operator may set a lower limit)"
	// +optional
	CPU *intstr.IntOrString `json:"cpu,omitempty"`

	// Memory of the guest (the sample's "2G" is 2×10⁹ bytes): at least 128Mi, at most the
	// operator's --vm-max-memory. Defaulted to 1Gi. At most 64 characters.
	// +kubebuilder:default="1Gi"
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).compareTo(quantity('128Mi')) >= 0",message="must be at least 128Mi"
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).compareTo(quantity('4Ti')) <= 0",message="must be at most 4Ti (the operator may set a lower limit)"
	// +kubebuilder:validation:XValidation:rule="(type(self) == string ? size(self) : 0) <= 64",message="must be at most 64 characters"
	// +optional
	Memory *resource.Quantity `json:"memory,omitempty"`

	// Image is a container disk: an image holding the VM's boot disk (a qcow2 or raw file
	// under /disk, as KubeVirt's containerDisk), which spec.rootDisk is made from: imported
	// once (Persistent, the default) or afresh at every start (Ephemeral). Defaulted to the
	// operator's --vm-default-image.
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^[^\s\x00-\x1f\x7f]*$`
	// +optional
	Image string `json:"image,omitempty"`

	// Firmware the guest boots with: BIOS (default) or UEFI (pod backend: OVMF; kubevirt
	// backend: KubeVirt's EFI firmware).
	// +kubebuilder:default=BIOS
	// +optional
	Firmware VMFirmware `json:"firmware,omitempty"`
	// CPUModel is the CPU model QEMU shows the guest (pod backend), with optional feature
	// flags ("Skylake-Server", "EPYC,+avx2"). Default: "host" with KVM (the node's own CPU),
	// "max" in software emulation. A model the node's CPU cannot provide fails the launcher.
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][-A-Za-z0-9_.]*(,[-+]?[A-Za-z0-9][-A-Za-z0-9_.=]*)*$`
	// +kubebuilder:validation:XValidation:rule="!self.matches('^help(,|$)')",message="help is not a CPU model"
	// +optional
	CPUModel string `json:"cpuModel,omitempty"`
	// RunStrategy says when the VM runs: Always (default), Halted, RerunOnFailure or Manual.
	// +kubebuilder:default=Always
	// +optional
	RunStrategy RunStrategy `json:"runStrategy,omitempty"`

	// StopAction is what every stop but the guest's own power-off does to the guest: PowerOff
	// (default) or Hibernate. It applies to an idle stop, runStrategy Halted, a drain (the
	// launcher pod evicted), a change of the spec that replaces the launcher pod and a delete
	// (whose state goes with the volume). Hibernate needs a Persistent root disk larger than
	// spec.memory (the state is saved on its volume, so it counts in the storage the VM holds)
	// and the pod backend; the guest's memory must be written out within
	// spec.shutdownGracePeriod, or it is powered off.
	// +kubebuilder:default=PowerOff
	// +optional
	StopAction StopAction `json:"stopAction,omitempty"`

	// RootDisk is the disk the guest boots from: Persistent (default) or Ephemeral.
	// +kubebuilder:default={}
	// +optional
	RootDisk VMRootDisk `json:"rootDisk,omitempty"`

	// Disk is the data disk, the guest's second disk, always persistent.
	// +kubebuilder:default={}
	// +optional
	Disk VMDisk `json:"disk,omitempty"`

	// CloudInit configures the guest at first boot.
	// +optional
	CloudInit *VMCloudInit `json:"cloudInit,omitempty"`

	// Ports of the guest the VM's Service exposes; SSH (22) when unset.
	// +kubebuilder:default={{name: ssh, port: 22, protocol: TCP}}
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	// +optional
	Ports []VMPort `json:"ports,omitempty"`

	// Backend runs the VM: auto (default), pod or kubevirt. It cannot change.
	// +kubebuilder:default=auto
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="backend is immutable"
	// +optional
	Backend VMBackend `json:"backend,omitempty"`

	// ShutdownGracePeriod is how long the guest has to shut down when it is stopped or
	// deleted (an ACPI power-off) before it is killed: from 0s to 1h (the pod's or KubeVirt's
	// termination grace period; a longer one would keep a deleted VM, and the node, waiting for
	// a guest that ignores the power-off). At most 32 characters.
	// +kubebuilder:default="60s"
	// +kubebuilder:validation:XValidation:rule="size(self) <= 32",message="must be at most 32 characters"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s') && duration(self) <= duration('1h')",message="must be from 0s to 1h, such as 60s or 5m"
	// +optional
	ShutdownGracePeriod *metav1.Duration `json:"shutdownGracePeriod,omitempty"`

	// IdleTimeout stops the VM after it has been unused this long (pod backend: no
	// connection to any of its forwarded TCP ports, an SSH session for one, and no input on its
	// serial console), keeping its disk: at most the operator's --vm-idle-timeout when that is
	// set; unset, the operator's. A warning (status.idleStopAt, an IdleWarning event) comes
	// first. Setting it, or the operator's, replaces a running launcher pod once (it then
	// serves the guest's activity to the operator). At least 1m, at most 32 characters.
	// +kubebuilder:validation:XValidation:rule="size(self) <= 32",message="must be at most 32 characters"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1m')",message="must be a duration of at least 1m, such as 30m or 2h"
	// +optional
	IdleTimeout *metav1.Duration `json:"idleTimeout,omitempty"`

	// StartRequests counts the starts asked for again after the operator stopped the VM
	// (status.stoppedReason): like any change to the spec, raising it starts the VM again.
	// +kubebuilder:validation:Minimum=0
	// +optional
	StartRequests int64 `json:"startRequests,omitempty"`
}

// StoppedByOperator reports whether the operator stopped the VM although its run strategy asks
// for it to run (status.stoppedReason), and no change to the spec has been made since: the
// generation it stopped at is still the one observed.
func (vm *VirtualMachine) StoppedByOperator() bool {
	return vm.Status.StoppedReason != "" && vm.Status.ObservedGeneration == vm.Generation
}

// VirtualMachineStatus is what the operator observed of the VM.
type VirtualMachineStatus struct {
	// ObservedGeneration is the generation last reconciled successfully.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Phase summarizes the VM's state.
	// +optional
	Phase VirtualMachinePhase `json:"phase,omitempty"`
	// Status is the phase under the kubebuilder VirtualMachine sample's name, kept for its clients ("Running", ...).
	// +optional
	Status string `json:"status,omitempty"`
	// Message says why the phase is what it is.
	// +optional
	Message string `json:"message,omitempty"`
	// Backend is the backend that runs the VM (auto resolved), kept for the VM's life.
	// +optional
	Backend VMBackend `json:"backend,omitempty"`
	// NodeName is the node the VM runs on.
	// +optional
	NodeName string `json:"nodeName,omitempty"`
	// IP is the VM's pod address.
	// +optional
	IP string `json:"ip,omitempty"`
	// Restarts counts the restarts of the launcher's containers in its current pod: a guest
	// that crashes or a launcher that cannot start shows here (and its last exit in message).
	// Always written, 0 included: a count, which tools read as filled in.
	// +optional
	Restarts int32 `json:"restarts"`
	// FailedStarts counts the launcher's failed exits (not a guest's power-off) in the current
	// start, before the guest answered; at the operator's --vm-max-failed-starts the VM is
	// stopped (stoppedReason StartFailed). Always written, 0 included.
	// +optional
	FailedStarts int32 `json:"failedStarts"`
	// StartedAt is when the guest last became Running (its SSH server, or cloud-init,
	// answered); an idle time counts from it when nothing has used the VM since.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// StoppedReason, when set, says why the operator stopped a VM whose run strategy asks it to
	// run: StartFailed, after --vm-max-failed-starts failed starts (Message says what failed),
	// or Idle, after its idle timeout unused. Its volumes are kept; any change to the spec (raising
	// spec.startRequests) starts it again.
	// +optional
	StoppedReason string `json:"stoppedReason,omitempty"`
	// IdleStopAt is when the VM will be stopped for being unused, set from the warning on (the
	// operator's --vm-idle-warning before it); any use postpones it.
	// +optional
	IdleStopAt *metav1.Time `json:"idleStopAt,omitempty"`
	// Hibernation is what the VM's last hibernation came to (spec.stopAction Hibernate): a
	// state saved and waiting for the next start, resumed, discarded or not saved.
	// +optional
	Hibernation *VMHibernation `json:"hibernation,omitempty"`
	// Conditions are Ready, Progressing and Degraded.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Inventory lists the children the operator applied.
	// +optional
	Inventory *Inventory `json:"inventory,omitempty"`
}

// HibernationState is where a VM's saved state is.
// +kubebuilder:validation:Enum=Saved;Resumed;Discarded;Failed
type HibernationState string

const (
	// HibernationSaved: the guest's state is saved on the root disk's volume, and the next
	// start resumes it.
	HibernationSaved HibernationState = "Saved"
	// HibernationResumed: the last start resumed the saved state; the state file is gone.
	HibernationResumed HibernationState = "Resumed"
	// HibernationDiscarded: the last start could not resume the saved state (reason says why)
	// and booted the guest cold.
	HibernationDiscarded HibernationState = "Discarded"
	// HibernationFailed: the last stop could not save the guest's state (reason says why)
	// and powered the guest off.
	HibernationFailed HibernationState = "Failed"
)

// VMHibernation is what the VM's launcher reported of its last hibernation: when it stopped
// (its termination message) and when it started again (its activity endpoint).
type VMHibernation struct {
	// State is Saved, Resumed, Discarded or Failed.
	State HibernationState `json:"state"`
	// Size of the saved state (about the memory the guest used), while Saved and once Resumed.
	// +optional
	Size *resource.Quantity `json:"size,omitempty"`
	// Reason says why the state was Discarded or could not be saved (Failed).
	// +optional
	Reason string `json:"reason,omitempty"`
	// Time is when the launcher reported the state, as the operator saw it.
	Time metav1.Time `json:"time"`
}

// VirtualMachine is a virtual machine run by Kubernetes: QEMU in a pod, or KubeVirt when the
// cluster has it; started, stopped and restarted by its run strategy, with a persistent disk.
//
// Its name is at most 63 characters, starts with a letter and holds only lower-case letters,
// digits and '-': the chart names the VM's Service (and KubeVirt's VirtualMachine) after it (a
// DNS-1035 label) and every child carries it as a label value (at most 63 characters). Both
// are checked at creation only, so a VM stored before these rules can still be changed and
// deleted.
//
// Size: the largest spec the CRD admits is about 51 KiB of JSON (cloud-init 48 KiB: user data
// 32 KiB and SSH keys 16 KiB; ports 2 KiB; image, CPU model, storage classes and quantities
// under 2 KiB), so that no tenant's object grows the operator's memory (each object is held
// several times) beyond that. TestLargestAdmittedSpecsStaySmall (test/integration) measures it.
// +kubebuilder:validation:XValidation:rule="oldSelf.hasValue() || size(self.metadata.name) <= 63",optionalOldSelf=true,message="metadata.name must be at most 63 characters: it is the value of the app.kubernetes.io/instance label of every child, and the name of its Service (a DNS label)"
// +kubebuilder:validation:XValidation:rule="oldSelf.hasValue() || self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",optionalOldSelf=true,message="metadata.name must start with a letter and hold only lower-case letters, digits and '-' (no '.'): it is the name of the VM's Service, which must be a DNS label (RFC 1035)"
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=cvm;cvms,categories=cloudspace
// +kubebuilder:printcolumn:name="CPU",type=string,JSONPath=`.spec.cpu`
// +kubebuilder:printcolumn:name="Memory",type=string,JSONPath=`.spec.memory`
// +kubebuilder:printcolumn:name="Strategy",type=string,JSONPath=`.spec.runStrategy`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Root disk",type=string,JSONPath=`.spec.rootDisk.persistence`,priority=1
// +kubebuilder:printcolumn:name="Stop",type=string,JSONPath=`.spec.stopAction`,priority=1
// +kubebuilder:printcolumn:name="Hibernation",type=string,JSONPath=`.status.hibernation.state`,priority=1
// +kubebuilder:printcolumn:name="Backend",type=string,JSONPath=`.status.backend`,priority=1
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.status.nodeName`,priority=1
// +kubebuilder:printcolumn:name="IP",type=string,JSONPath=`.status.ip`
// +kubebuilder:printcolumn:name="Restarts",type=integer,JSONPath=`.status.restarts`,priority=1
// +kubebuilder:printcolumn:name="Stopped",type=string,JSONPath=`.status.stoppedReason`,priority=1
// +kubebuilder:printcolumn:name="Idle stop",type=string,JSONPath=`.status.idleStopAt`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type VirtualMachine struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   VirtualMachineSpec   `json:"spec"`
	Status VirtualMachineStatus `json:"status,omitempty"`
}

// VirtualMachineList is a list of VirtualMachines.
// +kubebuilder:object:root=true
type VirtualMachineList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VirtualMachine `json:"items"`
}

func init() {
	SchemeBuilder.Register(&VirtualMachine{}, &VirtualMachineList{})
}
