package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// WorkspacePhase is where a workspace is in its life.
// +kubebuilder:validation:Enum=Pending;Starting;Running;Stopping;Stopped;Failed
type WorkspacePhase string

// Workspace phases.
const (
	// WorkspacePending: accepted; nothing is scheduled yet.
	WorkspacePending WorkspacePhase = "Pending"
	// WorkspaceStarting: the IDE pod exists and is not ready yet.
	WorkspaceStarting WorkspacePhase = "Starting"
	// WorkspaceRunning: the IDE is ready at status.url.
	WorkspaceRunning WorkspacePhase = "Running"
	// WorkspaceStopping: spec.running is false and the IDE pod is going away.
	WorkspaceStopping WorkspacePhase = "Stopping"
	// WorkspaceStopped: no IDE pod; the storage is kept.
	WorkspaceStopped WorkspacePhase = "Stopped"
	// WorkspaceFailed: the IDE cannot start (a crash loop, an image that cannot be pulled, no
	// readiness within spec.startTimeout) or its node is lost; see status.message.
	WorkspaceFailed WorkspacePhase = "Failed"
)

// ReclaimPolicy says what happens to a workspace's storage when the workspace is deleted.
// +kubebuilder:validation:Enum=Retain;Delete
type ReclaimPolicy string

const (
	// ReclaimRetain keeps the PersistentVolumeClaim, unowned and labelled, for a later workspace
	// of the same name and namespace to adopt.
	ReclaimRetain ReclaimPolicy = "Retain"
	// ReclaimDelete deletes the PersistentVolumeClaim with the workspace.
	ReclaimDelete ReclaimPolicy = "Delete"
)

// WorkspaceResources limit the IDE container (the legacy CloudIdeService's ResourceLimit, less storage).
type WorkspaceResources struct {
	// CPU is the IDE's CPU limit (at most 64 characters).
	// +kubebuilder:default="1"
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).isGreaterThan(quantity('0'))",message="must be a positive quantity"
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).compareTo(quantity('64')) <= 0",message="must be at most 64 (the operator may set a lower limit)"
	// +kubebuilder:validation:XValidation:rule="(type(self) == string ? size(self) : 0) <= 64",message="must be at most 64 characters"
	// +optional
	CPU *resource.Quantity `json:"cpu,omitempty"`
	// Memory is the IDE's memory limit and request (at most 64 characters).
	// +kubebuilder:default="2Gi"
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).isGreaterThan(quantity('0'))",message="must be a positive quantity"
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).compareTo(quantity('1Ti')) <= 0",message="must be at most 1Ti (the operator may set a lower limit)"
	// +kubebuilder:validation:XValidation:rule="(type(self) == string ? size(self) : 0) <= 64",message="must be at most 64 characters"
	// +optional
	Memory *resource.Quantity `json:"memory,omitempty"`
}

// WorkspaceStorage is the workspace's persistent home directory.
type WorkspaceStorage struct {
	// Size of the volume (at most 64 characters).
	// +kubebuilder:default="10Gi"
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).isGreaterThan(quantity('0'))",message="must be a positive quantity"
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).compareTo(quantity('64Ti')) <= 0",message="must be at most 64Ti (the operator may set a lower limit)"
	// +kubebuilder:validation:XValidation:rule="(type(self) == string ? size(self) : 0) <= 64",message="must be at most 64 characters"
	// +optional
	Size *resource.Quantity `json:"size,omitempty"`
	// StorageClassName of the claim; the cluster's default class when empty. At most 253
	// characters (an object name).
	// +kubebuilder:validation:MaxLength=253
	// +optional
	StorageClassName *string `json:"storageClassName,omitempty"`
	// ReclaimPolicy: Delete (default) removes the volume with the workspace; Retain keeps it.
	// +kubebuilder:default=Delete
	// +optional
	ReclaimPolicy ReclaimPolicy `json:"reclaimPolicy,omitempty"`
}

// WorkspaceGit is a repository cloned into the workspace on its first start.
type WorkspaceGit struct {
	// URL of the repository, https:// only. ssh:// and git@ URLs are refused: the clone runs
	// with no SSH key and no known_hosts, so it could only fail. Plain http:// is refused: a
	// clone over it can be tampered with on the way. The clone has no credentials either: a
	// private repository is cloned from the IDE's terminal instead.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.startsWith('https://')",message="must be an https:// URL: ssh:// and git@ URLs are not supported (the clone has no SSH key), nor is plain http:// (a clone over it can be tampered with); the clone has no credentials, so clone a private repository from the IDE's terminal instead"
	URL string `json:"url"`
	// Ref is the branch or tag to check out; the repository's default branch when empty.
	// +kubebuilder:validation:MaxLength=255
	// +optional
	Ref string `json:"ref,omitempty"`
}

// WorkspaceIngress exposes the IDE at a host name.
type WorkspaceIngress struct {
	// Host is the DNS name the IDE is served at.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Host string `json:"host"`
	// ClassName is the IngressClass; the cluster's default when empty. At most 253 characters
	// (an object name).
	// +kubebuilder:validation:MaxLength=253
	// +optional
	ClassName *string `json:"className,omitempty"`
	// TLSSecretName is the Secret holding the host's certificate; "<workspace name>-tls" when
	// empty, which the annotations the operator adds to every workspace Ingress (for example
	// cert-manager's issuer) may fill. The IDE is never served over plain HTTP.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	// +optional
	TLSSecretName string `json:"tlsSecretName,omitempty"`
}

// WorkspaceAccess is how the IDE is logged into. The IDE always asks for a password: the
// operator derives one per workspace and rotation, keeps it in the Secret
// "<workspace name>-access" (key "password") and the API hands it to the owner (GetAccess).
type WorkspaceAccess struct {
	// Rotation counts password changes: raising it gives the IDE a new password and restarts
	// it, keeping the volume. It never goes back, which would bring an old password back.
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:XValidation:rule="self >= oldSelf",message="rotation may only increase"
	// +optional
	Rotation int64 `json:"rotation,omitempty"`
}

// WorkspaceSpec is a browser IDE a user asked for.
type WorkspaceSpec struct {
	// Owner is the user the workspace belongs to. It cannot change.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9._]*[a-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="owner is immutable"
	// +required
	Owner string `json:"owner"`

	// Image is the IDE image (code-server or one built on it).
	// +kubebuilder:default="codercom/code-server:4.96.4"
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^[^\s\x00-\x1f\x7f]*$`
	// +optional
	Image string `json:"image,omitempty"`

	// Port the IDE listens on.
	// +kubebuilder:default=8080
	// +kubebuilder:validation:Minimum=1024
	// +kubebuilder:validation:Maximum=65535
	// +optional
	Port int32 `json:"port,omitempty"`

	// Running starts (true, the default) or stops (false) the IDE; stopping keeps the storage.
	// +kubebuilder:default=true
	// +optional
	Running *bool `json:"running,omitempty"`

	// Resources limit the IDE.
	// +kubebuilder:default={}
	// +optional
	Resources WorkspaceResources `json:"resources,omitempty"`

	// Storage is the workspace's persistent volume.
	// +kubebuilder:default={}
	// +optional
	Storage WorkspaceStorage `json:"storage,omitempty"`

	// Git, when set, is cloned into the workspace the first time it starts.
	// +optional
	Git *WorkspaceGit `json:"git,omitempty"`

	// Env sets environment variables in the IDE: values, ConfigMap keys and field references,
	// never a Secret (secretKeyRef). At most 64 variables, 8 KiB a value, 16 KiB in all
	// (EnvVars). Resource references (resourceFieldRef) cannot be used either: their divisor is
	// a quantity that the API server accepts in forms the operator's Go types refuse. PASSWORD
	// and HASHED_PASSWORD cannot be set: they are the IDE's login. The gRPC API sets no env.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self.all(e, e.name != 'PASSWORD' && e.name != 'HASHED_PASSWORD')",message="PASSWORD and HASHED_PASSWORD are the IDE's login, set by the operator (see spec.access)"
	// +kubebuilder:validation:XValidation:rule="self.all(e, !has(e.valueFrom) || !has(e.valueFrom.resourceFieldRef))",message="resourceFieldRef is not allowed: use a value (its divisor, a quantity the API server and the operator parse differently, could stop the operator's cache of Workspaces)"
	Env EnvVars `json:"env,omitempty"`

	// Ingress, when set, serves the IDE at a host name (if the cluster has the Ingress API).
	// +optional
	Ingress *WorkspaceIngress `json:"ingress,omitempty"`

	// Access is how the IDE is logged into.
	// +kubebuilder:default={}
	// +optional
	Access WorkspaceAccess `json:"access,omitempty"`

	// StartTimeout is how long the IDE may take to become ready before the phase is Failed
	// (at most 32 characters).
	// +kubebuilder:default="5m"
	// +kubebuilder:validation:XValidation:rule="size(self) <= 32",message="must be at most 32 characters"
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="must be a positive duration such as 90s or 5m"
	// +optional
	StartTimeout *metav1.Duration `json:"startTimeout,omitempty"`

	// IdleTimeout stops the IDE after it has been unused this long (no editor or terminal
	// activity, no call on it through the workspace API), keeping its storage: at most the
	// operator's --workspace-idle-timeout when that is set; unset, the operator's. A warning
	// (status.idleStopAt) comes first. At least 1m, at most 32 characters.
	// +kubebuilder:validation:XValidation:rule="size(self) <= 32",message="must be at most 32 characters"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1m')",message="must be a duration of at least 1m, such as 30m or 2h"
	// +optional
	IdleTimeout *metav1.Duration `json:"idleTimeout,omitempty"`

	// StartRequests counts the starts asked for again after the operator stopped the workspace
	// (status.stoppedReason): like any change to the spec, raising it starts the workspace
	// again. The API's Start raises it; with kubectl, fixing the spec is enough.
	// +kubebuilder:validation:Minimum=0
	// +optional
	StartRequests int64 `json:"startRequests,omitempty"`
}

// WantsRunning reports whether the spec asks for the IDE to run: running unset or true.
func (s *WorkspaceSpec) WantsRunning() bool {
	return s.Running == nil || *s.Running
}

// Why the operator stopped a workspace or VM whose spec asks it to run (status.stoppedReason).
const (
	// StoppedStartFailed: its IDE, or the VM's launcher, failed to start
	// --workspace-max-failed-starts (--vm-max-failed-starts) times.
	StoppedStartFailed = ReasonStartFailed
	// StoppedIdle: the IDE, or the VM, was unused for its idle timeout.
	StoppedIdle = "Idle"
)

// StoppedByOperator reports whether the operator stopped the workspace although its spec asks
// for it to run (status.stoppedReason), and no change to the spec has been made since: the
// generation it stopped at is still the one observed.
func (ws *Workspace) StoppedByOperator() bool {
	return ws.Status.StoppedReason != "" && ws.Status.ObservedGeneration == ws.Generation
}

// Runs reports whether the IDE is to run: the spec asks for it and the operator has not
// stopped it.
func (ws *Workspace) Runs() bool {
	return ws.Spec.WantsRunning() && !ws.StoppedByOperator()
}

// WorkspaceStatus is what the operator observed of the workspace.
type WorkspaceStatus struct {
	// ObservedGeneration is the generation last reconciled successfully.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Phase summarizes the IDE's state.
	// +optional
	Phase WorkspacePhase `json:"phase,omitempty"`
	// Message says why the phase is what it is (for Failed, the reason).
	// +optional
	Message string `json:"message,omitempty"`
	// NodeName is the node the IDE runs on.
	// +optional
	NodeName string `json:"nodeName,omitempty"`
	// PodIP is the IDE pod's address.
	// +optional
	PodIP string `json:"podIP,omitempty"`
	// Port is the port the IDE serves on.
	// +optional
	Port int32 `json:"port,omitempty"`
	// URL is where the IDE is reached: the ingress host, else the in-cluster Service.
	// +optional
	URL string `json:"url,omitempty"`
	// StartedAt is when the IDE last became ready.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// StartRequestedAt is when the current start began; the start timeout counts from it.
	// +optional
	StartRequestedAt *metav1.Time `json:"startRequestedAt,omitempty"`
	// Restarts counts the restarts of the IDE pod's containers: exits, whether the IDE was
	// starting or running. Always written, 0 included: a count, which tools read as filled in.
	// +optional
	Restarts int32 `json:"restarts"`
	// FailedStarts counts the IDE's exits during the current start, before it was ready; at
	// the operator's --workspace-max-failed-starts the workspace is stopped. An IDE that was
	// running and exits starts again: that exit is the new start's first failure. Always
	// written, 0 included.
	// +optional
	FailedStarts int32 `json:"failedStarts"`
	// StoppedReason, when set, says why the operator stopped a workspace whose spec asks it to
	// run: StartFailed, after --workspace-max-failed-starts failed starts (Message says what
	// failed), or Idle, after its idle timeout unused. Its storage is kept and it counts as
	// stopped for the quota; any change to the spec (the API's Start raises
	// spec.startRequests) starts it again.
	// +optional
	StoppedReason string `json:"stoppedReason,omitempty"`
	// IdleStopAt is when the IDE will be stopped for being unused, set from the warning on
	// (the operator's --workspace-idle-warning before it); any use postpones it.
	// +optional
	IdleStopAt *metav1.Time `json:"idleStopAt,omitempty"`
	// UntouchedSince is, while the IDE is stopped, the last of: its stop, the last change to
	// the spec, and the last call on the workspace through the API that the operator knew of.
	// Staleness counts from it.
	// +optional
	UntouchedSince *metav1.Time `json:"untouchedSince,omitempty"`
	// StaleSince is when the workspace was reported stale: stopped and untouched for the
	// operator's --workspace-stale-after. Starting it, or any change, makes it fresh again.
	// +optional
	StaleSince *metav1.Time `json:"staleSince,omitempty"`
	// DeleteAt is when the operator will delete this stale workspace, as its
	// --workspace-delete-stale-after asks, never sooner after StaleSince than the gap between
	// the two settings; its volume goes or stays by reclaimPolicy. Starting it, or any change,
	// before then keeps it.
	// +optional
	DeleteAt *metav1.Time `json:"deleteAt,omitempty"`
	// IngressHost is the host this workspace claims (spec.ingress.host, in lower case), and
	// IngressHostClaimedAt when it first did: a host is held by the workspace whose claim is
	// the earliest, so that moving an older workspace onto a host another one is served at
	// takes nothing from it.
	// +optional
	IngressHost string `json:"ingressHost,omitempty"`
	// IngressHostClaimedAt is when this workspace first claimed IngressHost.
	// +optional
	IngressHostClaimedAt *metav1.Time `json:"ingressHostClaimedAt,omitempty"`
	// Conditions are Ready, Progressing and Degraded.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Inventory lists the children the operator applied.
	// +optional
	Inventory *Inventory `json:"inventory,omitempty"`
}

// Workspace is a browser IDE (code-server) with its own storage, limits, start/stop and a URL.
//
// Its name is at most 63 characters, starts with a letter and holds only lower-case letters,
// digits and '-': the chart names the IDE's Service after it (a DNS-1035 label) and every child
// carries it as a label value (at most 63 characters). Both are checked at creation only, so a
// Workspace stored before these rules can still be changed and deleted.
//
// Size: the largest spec the CRD admits is about 26 KiB of JSON (env 21 KiB of it: 16 KiB of
// text and the JSON around 64 variables; git URL and ref 2.3 KiB; the rest under 3 KiB), so
// that no tenant's object grows the operator's memory (each object is held several times)
// beyond that. TestLargestAdmittedSpecsStaySmall (test/integration) measures it.
// +kubebuilder:validation:XValidation:rule="oldSelf.hasValue() || size(self.metadata.name) <= 63",optionalOldSelf=true,message="metadata.name must be at most 63 characters: it is the value of the app.kubernetes.io/instance label of every child, and the name of its Service (a DNS label)"
// +kubebuilder:validation:XValidation:rule="oldSelf.hasValue() || self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",optionalOldSelf=true,message="metadata.name must start with a letter and hold only lower-case letters, digits and '-' (no '.'): it is the name of the Workspace's Service, which must be a DNS label (RFC 1035)"
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=ws,categories=cloudspace
// +kubebuilder:selectablefield:JSONPath=`.spec.owner`
// +kubebuilder:printcolumn:name="Owner",type=string,JSONPath=`.spec.owner`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.status.nodeName`,priority=1
// +kubebuilder:printcolumn:name="IP",type=string,JSONPath=`.status.podIP`,priority=1
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=`.status.url`
// +kubebuilder:printcolumn:name="Failed starts",type=integer,JSONPath=`.status.failedStarts`,priority=1
// +kubebuilder:printcolumn:name="Stopped",type=string,JSONPath=`.status.stoppedReason`,priority=1
// +kubebuilder:printcolumn:name="Idle stop",type=string,JSONPath=`.status.idleStopAt`,priority=1
// +kubebuilder:printcolumn:name="Stale since",type=date,JSONPath=`.status.staleSince`,priority=1
// +kubebuilder:printcolumn:name="Delete at",type=string,JSONPath=`.status.deleteAt`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Workspace struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   WorkspaceSpec   `json:"spec"`
	Status WorkspaceStatus `json:"status,omitempty"`
}

// WorkspaceList is a list of Workspaces.
// +kubebuilder:object:root=true
type WorkspaceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Workspace `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Workspace{}, &WorkspaceList{})
}
