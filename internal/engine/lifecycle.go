package engine

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Lifecycle is the Go code a kind registers with the engine: the chart values from its spec,
// the one thing every kind gives. Anything more is an optional interface of one method, which
// the engine finds by type assertion and otherwise does without: StatusReporter (status fields
// of the kind's own), Retainer (children that outlive the resource), PodObserver (pods for the
// status) and Adopter (retained children a new resource may take over). A kind that registers
// no lifecycle is a pure chart kind (see ChartOnly).
//
// Every method is pure: it computes from the custom resource and what the engine shows it, and
// never writes; the engine does the writing. A lifecycle that wraps another must embed its
// type, not the Lifecycle interface, or the optional methods are lost without a word: assert
// at compile time each interface a lifecycle means to implement (var _ Retainer = ...).
type Lifecycle interface {
	// Values returns the chart values for obj. An error means the spec can never render; it is
	// reported in the Degraded condition and not retried until the spec changes.
	Values(obj *unstructured.Unstructured) (map[string]any, error)
}

// StatusReporter is implemented by lifecycles with status fields of their own; without it, a
// kind's status is the engine's fields alone.
type StatusReporter interface {
	// Status returns the kind's status fields, computed from obj and its observed state (for
	// example a count of ready nodes). They are written next to the engine's own fields.
	Status(obj *unstructured.Unstructured, observed Observed) (StatusResult, error)
}

// Retainer is implemented by lifecycles whose resources leave children behind; without it,
// every child is deleted with its resource.
type Retainer interface {
	// Retain returns, of children, those that must outlive obj (a volume kept by a reclaim
	// policy, say). The engine asks at every render, and gives those children no owner
	// reference, so that the garbage collector never deletes them; it asks again with the live
	// children when obj is deleted, and releases those it returns instead of deleting them.
	Retain(obj *unstructured.Unstructured, children []*unstructured.Unstructured) ([]*unstructured.Unstructured, error)
}

// statusOf is what the engine asks of lc for obj's status: a StatusReporter's fields, or none.
func statusOf(lc Lifecycle, obj *unstructured.Unstructured, observed Observed) (StatusResult, error) {
	if sr, ok := lc.(StatusReporter); ok {
		return sr.Status(obj, observed)
	}
	return StatusResult{}, nil
}

// retainedOf is what the engine asks of lc for the children that outlive obj: a Retainer's,
// or none.
func retainedOf(lc Lifecycle, obj *unstructured.Unstructured, children []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	if r, ok := lc.(Retainer); ok {
		return r.Retain(obj, children)
	}
	return nil, nil
}

// Observed is what the engine shows a lifecycle of a custom resource's live state.
type Observed struct {
	// Children are the live children, in install order.
	Children []*unstructured.Unstructured
	// Pods are the pods the chart's workloads run; only a PodObserver is shown them.
	Pods []*unstructured.Unstructured
	// Nodes are, for a NodeObserver, the nodes that say why its pods are not running, by name:
	// the node of each pod that is not ready (one being deleted too), and, while a pod waits to be scheduled, the
	// node each claim among the children is bound to (its selected-node annotation). A node
	// that no longer exists is absent. Nil when none was of interest or they could not be read.
	Nodes map[string]*corev1.Node
}

// StatusResult is what StatusReporter.Status computed.
type StatusResult struct {
	// Fields are the kind's whole part of the status: a field the kind set before and leaves
	// out now is removed. The engine's own fields (observedGeneration, conditions, inventory)
	// are the engine's alone and ignored here.
	Fields map[string]any
	// RequeueAfter, when positive, asks to look again after this long even if nothing changes
	// (for example when a start timeout will expire).
	RequeueAfter time.Duration
	// Progress names the Fields that only count progress (like ready replicas). A status whose
	// only changes are in these fields and in condition messages is written at most once per
	// status interval, so that a rollout does not cost a write per step.
	Progress []string
	// Prompt asks for this status to be written at once rather than put off until the
	// children are ready (the first status of a generation waits for them up to the first
	// status delay): for a status someone is waiting to read, like a workspace now Running.
	Prompt bool
	// Failure, when set, says the resource is failing in a way kstatus cannot see in its
	// children (a container that keeps restarting, an image that cannot be pulled): the
	// resource is then Degraded with this message, as for a failed child.
	Failure string
	// FailureReason is the Degraded condition's reason for Failure when no child failed too:
	// the kind's own documented reason; ReasonChildFailed when empty.
	FailureReason string
	// Notice, when its Reason is set, is a Normal event to record with this status: it is
	// recorded when the status is written with a change, so a notice a kind returns on every
	// reconcile of the same status is recorded once.
	Notice Notice
	// Written, when set, is called once this status is written with a change, as Notice is
	// recorded: for a kind's metrics of a transition (a start ended, a stop by the operator),
	// which must count once however many reconciles compute it.
	Written func()
}

// Notice is an event a kind records about a resource: a documented constant reason and a
// message.
type Notice struct {
	Reason, Message string
}

// PodObserver is implemented by lifecycles whose status needs the pods that the chart's
// workloads run (for a node name or an address). The chart must label those pods with
// LabelManagedBy: ManagedByValue, LabelName: <chart name> and LabelInstance: <release name>;
// pod changes then reconcile the resource.
type PodObserver interface {
	ObservesPods()
}

// PodWatcher is implemented by PodObservers that must see each version of their pods the watch
// delivers, not only what the cache holds when the status is computed: a pod's last status
// before the kubelet deletes it (its containers' termination messages) is gone by then.
type PodWatcher interface {
	PodObserver
	// PodChanged is called, from the watch, with each version of a pod of the chart (the one
	// before an update, the one after, the last before a delete): it must return quickly and
	// must not modify pod.
	PodChanged(pod client.Object)
}

// NodeObserver is implemented by PodObservers whose status says what the nodes under their pods
// say (a lost node, a cordoned one holding the volume): only they are shown Observed.Nodes,
// read from the API server while a pod is not ready.
type NodeObserver interface {
	PodObserver
	ObservesNodes()
}

// Adopter is implemented by lifecycles that let a custom resource take over a child that the
// engine kept (Retainer) for an earlier resource of the same kind and name. The engine
// asks only about such children; any other existing object in a child's place is an ownership
// conflict, never adopted.
type Adopter interface {
	// Adopt returns nil when obj may take over the retained child, or why not. A *Refusal
	// names the reason the conditions report; any other error reports OwnershipConflict.
	Adopt(obj *unstructured.Unstructured, retained metav1.Object) error
}

// Refusal is an Adopter's no, with the condition reason that says it.
type Refusal struct {
	Reason  string
	Message string
}

func (r *Refusal) Error() string { return r.Message }

// ChartOnly is the lifecycle of a kind with no Go code: the chart's values are the CR's spec.
// It implements no optional interface, so the kind has no status fields of its own and every
// child is deleted with the CR.
type ChartOnly struct{}

// Values returns a copy of spec.
func (ChartOnly) Values(obj *unstructured.Unstructured) (map[string]any, error) {
	spec, _, err := unstructured.NestedMap(obj.Object, "spec")
	return spec, err
}
