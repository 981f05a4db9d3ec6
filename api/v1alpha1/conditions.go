package v1alpha1

// Condition types every managed kind reports in status.conditions. They follow kstatus
// conventions so that kubectl wait, Argo CD, Flux and kpt read them without custom health
// checks: Ready, Progressing and Degraded are always present; Reconciling and Stalled, which
// kstatus reads, have its abnormal-true polarity and are present only while True (as on Flux's
// own resources). status.observedGeneration is the generation last handled: reconciled, or
// found Stalled. The "Status conditions" table in docs/engine.md lists every reason and what to do.
const (
	// ConditionReady is True when every child is current and the spec was fully applied.
	ConditionReady = "Ready"
	// ConditionProgressing is True while children are being applied or are not yet ready.
	ConditionProgressing = "Progressing"
	// ConditionDegraded is True when the spec cannot be rendered or applied, or a child failed.
	ConditionDegraded = "Degraded"
	// ConditionReconciling is True while the operator works toward the spec: children are
	// being applied or are not yet current, a failure that may pass (the API server
	// unavailable, a child that could not be pruned) is being retried, or the resource is being
	// deleted. kstatus reads InProgress.
	ConditionReconciling = "Reconciling"
	// ConditionStalled is True when nothing will succeed until something changes: the chart
	// cannot render the spec (RenderFailed, ValuesInvalid), the API server refuses a child as
	// invalid (ApplyFailed), another object holds a child's place (OwnershipConflict,
	// VolumeOwnedByAnotherUser) or a child failed (ChildFailed, or a kind's own reason such as
	// IngressHostConflict). It clears by itself once the cause is gone. kstatus reads Failed.
	ConditionStalled = "Stalled"
)

// Condition reasons. Each is a CamelCase word that says why a condition has its status.
const (
	// ReasonReconciled: every child was applied and is current.
	ReasonReconciled = "Reconciled"
	// ReasonApplying: children were applied and some are not yet current.
	ReasonApplying = "Applying"
	// ReasonRenderFailed: the chart did not render with the CR's values; nothing was written.
	ReasonRenderFailed = "RenderFailed"
	// ReasonValuesInvalid: the values do not satisfy the chart's values.schema.json; nothing was written.
	ReasonValuesInvalid = "ValuesInvalid"
	// ReasonApplyFailed: the API server refused a child. When every refusal says the child is
	// invalid (HTTP 422, or 400 for a malformed object: a label value longer than 63 characters
	// made from a spec field, a change to an immutable field), no retry can succeed: nothing is
	// retried until the spec changes, the message names the child and the field, and the
	// Warning event's reason is EventChildInvalid.
	ReasonApplyFailed = "ApplyFailed"
	// ReasonPruneFailed: a child that is no longer rendered could not be deleted.
	ReasonPruneFailed = "PruneFailed"
	// ReasonOwnershipConflict: an object the operator did not create for this resource stands
	// where its chart renders a child; nothing is written until it is gone. The message names
	// the object and who holds it.
	ReasonOwnershipConflict = "OwnershipConflict"
	// ReasonVolumeOwnedByAnotherUser: a Workspace's name is that of an earlier workspace whose
	// volume was retained, and that volume belongs to another user; it is left untouched.
	ReasonVolumeOwnedByAnotherUser = "VolumeOwnedByAnotherUser"
	// ReasonChildFailed: a child reports that it failed (kstatus Failed), or the pods it runs
	// do for a reason none of the three below names.
	ReasonChildFailed = "ChildFailed"
	// ReasonCrashLoop: a container the resource runs keeps exiting (the kubelet's
	// CrashLoopBackOff). The message names the pod, the container, its image, the restarts and
	// the last exit code and message.
	ReasonCrashLoop = "CrashLoop"
	// ReasonImagePullFailed: an image the resource runs cannot be pulled (ImagePullBackOff,
	// an invalid image name, or a never-pull policy with the image absent). The message names
	// the image and the runtime's error.
	ReasonImagePullFailed = "ImagePullFailed"
	// ReasonContainerCannotStart: the runtime cannot create or start a container (a missing
	// ConfigMap key, a command that does not exist in the image). The message names it.
	ReasonContainerCannotStart = "ContainerCannotStart"
	// ReasonStartTimedOut: a Workspace's IDE did not become ready within spec.startTimeout; the
	// message says what it was waiting for.
	ReasonStartTimedOut = "StartTimedOut"
	// ReasonStartFailed: the operator stopped a Workspace after its IDE failed to start
	// --workspace-max-failed-starts times, or a VirtualMachine after its launcher failed
	// --vm-max-failed-starts times (status.stoppedReason says so too); the message gives the
	// last failure. The storage or disk is kept; any change to the spec starts it again.
	ReasonStartFailed = "StartFailed"
	// ReasonNodeNotReady: the node that runs the resource's pod stopped reporting or is not
	// ready (a lost node: its kubelet, runtime or link is down), or the node its volume is bound
	// to is. The message names the node and what it says; the resource runs again, with its
	// storage, when the node is back.
	ReasonNodeNotReady = "NodeNotReady"
	// ReasonNodeUnschedulable: the resource's pod waits for the node its volume is bound to,
	// which is cordoned (drained for maintenance). The message names the node; the pod starts
	// there once the node is uncordoned.
	ReasonNodeUnschedulable = "NodeUnschedulable"
	// ReasonPaused: the CR carries the pause annotation; nothing is reconciled.
	ReasonPaused = "Paused"
	// ReasonDeleting: the CR is being deleted and its children are being torn down.
	ReasonDeleting = "Deleting"
	// ReasonIngressHostConflict: a Workspace's spec.ingress.host is already held by another
	// Workspace, the oldest that claims it (creationTimestamp, then UID), in any namespace. The
	// workspace runs without its Ingress, and gets one once the holder is gone. The message names
	// the field; it does not name the holder, which may be another tenant's.
	ReasonIngressHostConflict = "IngressHostConflict"
	// ReasonIngressHostNotAllowed: a Workspace's spec.ingress.host does not match the host
	// pattern the operator's admin set (e.g. {owner}-{name}.ide.example.com). The workspace
	// runs without its Ingress until the host is changed to one that matches.
	ReasonIngressHostNotAllowed = "IngressHostNotAllowed"
)

// DegradedReasons are the reasons Degraded is True with: every reason above but Reconciled,
// Applying, Paused and Deleting. The cloudspace_failures_total counter has a series for each,
// for each kind, from the operator's start.
var DegradedReasons = []string{
	ReasonRenderFailed, ReasonValuesInvalid, ReasonApplyFailed, ReasonPruneFailed, ReasonOwnershipConflict,
	ReasonVolumeOwnedByAnotherUser, ReasonChildFailed, ReasonCrashLoop, ReasonImagePullFailed,
	ReasonContainerCannotStart, ReasonStartTimedOut, ReasonStartFailed, ReasonNodeNotReady,
	ReasonNodeUnschedulable, ReasonIngressHostConflict, ReasonIngressHostNotAllowed,
}

// Annotations and labels the operator reads or writes.
const (
	// PauseAnnotation, set to "true" on a CR, stops the operator from changing its children.
	PauseAnnotation = "infra.cloudspace.dev/paused"
	// Finalizer guards the teardown of a CR's children.
	Finalizer = "infra.cloudspace.dev/finalizer"
	// ServedByAnnotation names the watches.yaml selector of the operator that added the
	// finalizer (absent for an operator with no selector). Only that operator tears the CR down
	// once it has left every selector, so operators sharded by selector never touch each
	// other's CRs.
	ServedByAnnotation = "infra.cloudspace.dev/served-by"
	// RequestedByAnnotation names the cluster user who created a Workspace through the
	// workspace API for its owner (impersonation: a portal acting for a developer).
	RequestedByAnnotation = "infra.cloudspace.dev/requested-by"
)

// Event reasons the operator records on a custom resource.
const (
	// EventRequested: the workspace API created the Workspace for its owner at the request of
	// another identity (a portal impersonating the owner); the message names both.
	EventRequested = "Requested"
	// EventChildCreated: a child was created.
	EventChildCreated = "ChildCreated"
	// EventChildUpdated: a child was changed back to, or forward to, what the chart renders.
	EventChildUpdated = "ChildUpdated"
	// EventChildDeleted: a child was deleted (pruned, or torn down with the CR).
	EventChildDeleted = "ChildDeleted"
	// EventChildReleased: a child the kind retains was left in place on delete.
	EventChildReleased = "ChildReleased"
	// EventChildAdopted: a child kept after an earlier resource of the same name was deleted
	// was taken over by this one.
	EventChildAdopted = "ChildAdopted"
	// EventOwnershipConflict: an object the operator did not create stands in a child's place
	// (a kind may report a more precise reason, like ReasonVolumeOwnedByAnotherUser).
	EventOwnershipConflict = "OwnershipConflict"
	// EventReconcileFailed: rendering, applying or pruning failed; the message says why.
	EventReconcileFailed = "ReconcileFailed"
	// EventChildInvalid: the API server refused a rendered child as invalid (see
	// ReasonApplyFailed); the message names the child and the field, and nothing is retried
	// until the spec changes.
	EventChildInvalid = "ChildInvalid"
	// EventResourceInvalid: the API server refuses any change to the resource itself, its
	// finalizer or its status, as invalid (a value stored before its CRD refused it, which no
	// CEL rule lets pass unchanged). Only this event can say so; nothing is retried until the
	// spec changes.
	EventResourceInvalid = "ResourceInvalid"
	// EventIdleWarning: a Workspace or VirtualMachine unused for most of its idle timeout will
	// be stopped at status.idleStopAt unless used before; the message says when.
	EventIdleWarning = "IdleWarning"
	// EventStoppedByOperator: the operator stopped a Workspace or VirtualMachine its spec asks to
	// run (status.stoppedReason: Idle, or StartFailed); the message says why. Its volume or disk
	// is kept.
	EventStoppedByOperator = "StoppedByOperator"
	// EventHibernation: a VirtualMachine's launcher reported what came of its hibernation
	// (status.hibernation): the guest's state saved at a stop, resumed or discarded (and why) at a
	// start, or not saved (and why: the guest was powered off).
	EventHibernation = "Hibernation"
	// EventStale: a Workspace stopped and untouched for the operator's --workspace-stale-after
	// is stale (status.staleSince), or a volume kept after its workspace's delete was taken back
	// by none for as long (on the claim); the message says since when, and when the operator
	// will delete it if it deletes stale ones (status.deleteAt, the claim's delete-at).
	EventStale = "Stale"
	// EventDeletedStale: the operator deleted a stale Workspace at its status.deleteAt, or a
	// stale kept volume at its delete-at, as --workspace-delete-stale-after asks. A Workspace's
	// volume goes or stays by its reclaimPolicy.
	EventDeletedStale = "DeletedStale"
)
