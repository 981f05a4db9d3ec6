package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/log"

	corev1 "k8s.io/api/core/v1"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/render"
)

// engineStatus is the part of a custom resource's status the engine owns. Kinds add their own
// fields next to it (StatusReporter).
type engineStatus struct {
	ObservedGeneration int64                    `json:"observedGeneration,omitempty"`
	Conditions         []metav1.Condition       `json:"conditions,omitempty"`
	Inventory          *infrav1alpha1.Inventory `json:"inventory,omitempty"`
}

// readStatus reads the engine's part of obj's status; a null status is none.
func readStatus(obj *unstructured.Unstructured) (engineStatus, error) {
	var st engineStatus
	if v, found := obj.Object["status"]; found && v == nil {
		return st, nil
	}
	m, _, err := unstructured.NestedMap(obj.Object, "status")
	if err != nil || m == nil {
		return st, err
	}
	err = runtime.DefaultUnstructuredConverter.FromUnstructured(m, &st)
	return st, err
}

// engineKeys are the status fields the engine owns; a kind's fields never replace them.
var engineKeys = []string{"observedGeneration", "conditions", "inventory"}

// writeStatus sets obj's status to the engine's fields and the kind's: the kind's fields are
// its whole part of the status, so a field it set before and leaves out now is removed, and a
// nil field is removed too. Keys the engine owns are taken from st alone.
func writeStatus(obj *unstructured.Unstructured, st engineStatus, fields map[string]any) error {
	own, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&st)
	if err != nil {
		return err
	}
	m := make(map[string]any, len(own)+len(fields))
	for k, v := range fields {
		if v != nil && !slices.Contains(engineKeys, k) {
			m[k] = runtime.DeepCopyJSONValue(v)
		}
	}
	for k, v := range own {
		m[k] = v
	}
	return unstructured.SetNestedMap(obj.Object, m, "status")
}

// degradedBy reports whether the status already says Degraded for this reason and message.
func (st engineStatus) degradedBy(reason, message string) bool {
	c := meta.FindStatusCondition(st.Conditions, infrav1alpha1.ConditionDegraded)
	return c != nil && c.Status == metav1.ConditionTrue && c.Reason == reason && c.Message == message
}

// inventoryOf records the rendered children, in install order.
func inventoryOf(desired []*unstructured.Unstructured) *infrav1alpha1.Inventory {
	inv := &infrav1alpha1.Inventory{Entries: make([]infrav1alpha1.InventoryEntry, 0, len(desired))}
	for _, d := range desired {
		inv.Entries = append(inv.Entries, inventoryEntry(d))
	}
	return inv
}

// mergeInventory is every entry of a, then those of b that a lacks.
func mergeInventory(a, b *infrav1alpha1.Inventory) *infrav1alpha1.Inventory {
	if a == nil {
		return b
	}
	out := &infrav1alpha1.Inventory{Entries: slices.Clone(a.Entries)}
	for _, e := range b.Entries {
		if !slices.ContainsFunc(out.Entries, func(o infrav1alpha1.InventoryEntry) bool { return o.ID == e.ID }) {
			out.Entries = append(out.Entries, e)
		}
	}
	return out
}

// projectStatus lets the kind's lifecycle compute its status fields from what it observes:
// the live children and, for a PodObserver, their pods. It returns when the lifecycle wants
// another look.
func (r *reconciler) projectStatus(ctx context.Context, s *scope, live []*unstructured.Unstructured) (time.Duration, error) {
	observed := Observed{Children: live}
	if _, ok := r.lifecycle.(PodObserver); ok {
		pods, err := r.pods(ctx, s.obj)
		if err != nil {
			return 0, err
		}
		observed.Pods = pods
		if _, ok := r.lifecycle.(NodeObserver); ok {
			observed.Nodes = r.nodes(ctx, nodesOfInterest(pods, live))
		}
	}
	res, err := statusOf(r.lifecycle, s.obj, observed)
	if err != nil {
		return 0, fmt.Errorf("computing %s status: %w", r.gvk.Kind, err)
	}
	s.fields, s.progress, s.prompt, s.notice, s.written = res.Fields, res.Progress, res.Prompt, res.Notice, res.Written
	s.outcome.workloadFailure, s.outcome.workloadReason = res.Failure, res.FailureReason
	return res.RequeueAfter, nil
}

// pods lists, from the child cache, the pods the chart's workloads run for obj.
func (r *reconciler) pods(ctx context.Context, obj *unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	pods, err := r.children.List(ctx, podGVK, client.InNamespace(obj.GetNamespace()),
		client.MatchingLabels{LabelName: r.chart.Name(), LabelInstance: obj.GetName()})
	if err != nil {
		return nil, fmt.Errorf("listing the pods of %s %s: %w", r.gvk.Kind, obj.GetName(), err)
	}
	return pods, nil
}

// nodes reads the named nodes from the API server: they are read only while a pod is not
// ready, so the operator keeps no cache of every node (whose status lists its images). A node
// that cannot be read (an upgrade's RBAC not there yet, the API server busy) makes the whole
// answer unknown (nil) rather than failing the status: the pod's own reasons still say why.
func (r *reconciler) nodes(ctx context.Context, names []string) map[string]*corev1.Node {
	if len(names) == 0 {
		return nil
	}
	out := make(map[string]*corev1.Node, len(names))
	for _, name := range names {
		var n corev1.Node
		err := r.apiReader.Get(ctx, client.ObjectKey{Name: name}, &n)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			log.FromContext(ctx).Info("cannot read a node under the resource's pods", "node", name, "error", err.Error())
			return nil
		}
		out[name] = &n
	}
	return out
}

// SelectedNodeAnnotation is where the scheduler records the node a claim of a
// WaitForFirstConsumer class is bound to.
const SelectedNodeAnnotation = "volume.kubernetes.io/selected-node"

// nodesOfInterest names the nodes Observed.Nodes holds, each once, in order.
func nodesOfInterest(pods, children []*unstructured.Unstructured) []string {
	var names []string
	add := func(name string) {
		if name != "" && !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	for _, p := range pods {
		// A pod being deleted counts too: on a lost node it stays so until the node is back.
		node, _, _ := unstructured.NestedString(p.Object, "spec", "nodeName")
		if node == "" {
			for _, c := range children {
				if c.GetKind() == "PersistentVolumeClaim" {
					add(c.GetAnnotations()[SelectedNodeAnnotation])
				}
			}
		} else if !podReady(p) {
			add(node)
		}
	}
	return names
}

// podReady reports whether the pod's Ready condition is True.
func podReady(p *unstructured.Unstructured) bool {
	conditions, _, _ := unstructured.NestedSlice(p.Object, "status", "conditions")
	for _, c := range conditions {
		if m, ok := c.(map[string]any); ok && m["type"] == string(corev1.PodReady) {
			return m["status"] == string(corev1.ConditionTrue)
		}
	}
	return false
}

// podGVK is the kind the chart's workloads run.
var podGVK = schema.GroupVersionKind{Version: "v1", Kind: "Pod"}

// outcome is what a reconcile found; the conditions are computed from it alone.
type outcome struct {
	generation int64
	// err and reason describe a failure; nil when the reconcile succeeded.
	err    error
	reason string
	// stalled: the failure lasts until something changes (ConditionStalled); a failure that
	// is not stalled is retried.
	stalled bool
	// children are the live children after apply.
	children []*unstructured.Unstructured
	// workloadFailure is the kind's own finding of a failure (StatusResult.Failure), and
	// workloadReason its reason.
	workloadFailure, workloadReason string
	paused                          bool
	deleting                        bool
}

// failure records err with the reason that classifies it.
func (o *outcome) failure(reason string, err error) {
	o.reason, o.err = reason, err
}

// isRenderError reports whether err says the spec cannot render, which only a change fixes.
func isRenderError(err error) bool {
	var ve *render.ValuesError
	var te *render.TemplateError
	return errors.As(err, &ve) || errors.As(err, &te)
}

// reasonFor classifies an error from rendering.
func reasonFor(err error) string {
	var ve *render.ValuesError
	if errors.As(err, &ve) {
		return infrav1alpha1.ReasonValuesInvalid
	}
	return infrav1alpha1.ReasonRenderFailed
}

// setStatus sets the conditions on st from the outcome, and the observed generation when the
// outcome is stalled: that generation was handled, and failed; kstatus reads it together with
// ConditionStalled as Failed. A retried failure leaves the generation unobserved.
func setStatus(st *engineStatus, o outcome) {
	v := summarize(o)
	set := func(t string, c cond) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: t, Status: c.status, Reason: c.reason, Message: c.message, ObservedGeneration: o.generation})
	}
	set(infrav1alpha1.ConditionReady, v.ready)
	set(infrav1alpha1.ConditionProgressing, v.progressing)
	set(infrav1alpha1.ConditionDegraded, v.degraded)
	for _, abnormal := range []struct {
		t string
		c *cond
	}{{infrav1alpha1.ConditionReconciling, v.reconciling}, {infrav1alpha1.ConditionStalled, v.stalled}} {
		if abnormal.c == nil {
			meta.RemoveStatusCondition(&st.Conditions, abnormal.t)
		} else {
			set(abnormal.t, *abnormal.c)
		}
	}
	if v.stalled != nil {
		st.ObservedGeneration = o.generation
	}
}

type cond struct {
	status  metav1.ConditionStatus
	reason  string
	message string
}

// verdict is the conditions an outcome sets; reconciling and stalled are nil when absent.
type verdict struct {
	ready, progressing, degraded cond
	reconciling, stalled         *cond
}

func summarize(o outcome) verdict {
	t, f := metav1.ConditionTrue, metav1.ConditionFalse
	all := func(s metav1.ConditionStatus, reason, msg string) verdict {
		return verdict{ready: cond{f, reason, msg}, progressing: cond{s, reason, msg}, degraded: cond{f, reason, msg}}
	}
	switch {
	case o.deleting:
		v := all(t, infrav1alpha1.ReasonDeleting, "deleting the children")
		v.reconciling = &v.progressing
		return v
	case o.paused:
		return all(f, infrav1alpha1.ReasonPaused, "reconciliation is paused by the "+infrav1alpha1.PauseAnnotation+" annotation")
	case o.err != nil:
		return failed(o.reason, o.err.Error(), o.stalled)
	}
	failures, waiting := childProblems(o.children)
	reason := infrav1alpha1.ReasonChildFailed
	if o.workloadFailure != "" {
		if len(failures) == 0 && o.workloadReason != "" {
			reason = o.workloadReason
		}
		failures = append(failures, o.workloadFailure)
	}
	switch {
	case len(failures) > 0:
		return failed(reason, strings.Join(failures, "; "), true)
	case len(waiting) > 0:
		v := all(t, infrav1alpha1.ReasonApplying, "waiting for "+strings.Join(waiting, "; "))
		v.reconciling = &v.progressing
		return v
	}
	v := all(f, infrav1alpha1.ReasonReconciled, fmt.Sprintf("%d children are ready", len(o.children)))
	v.ready.status = t
	return v
}

// failed is the verdict on a failure: Stalled when it lasts until something changes,
// Reconciling while it is retried.
func failed(reason, msg string, stalled bool) verdict {
	t, f := metav1.ConditionTrue, metav1.ConditionFalse
	v := verdict{ready: cond{f, reason, msg}, progressing: cond{f, reason, msg}, degraded: cond{t, reason, msg}}
	c := cond{t, reason, msg}
	if stalled {
		v.stalled = &c
	} else {
		v.reconciling = &c
	}
	return v
}

// childProblems lists children kstatus finds Failed, and those not yet Current.
func childProblems(children []*unstructured.Unstructured) (failed, waiting []string) {
	for _, c := range children {
		res, err := kstatus.Compute(c)
		if err != nil {
			failed = append(failed, fmt.Sprintf("%s: %v", describe(c), err))
			continue
		}
		switch res.Status {
		case kstatus.CurrentStatus:
		case kstatus.FailedStatus:
			failed = append(failed, fmt.Sprintf("%s: %s", describe(c), res.Message))
		default:
			waiting = append(waiting, fmt.Sprintf("%s: %s", describe(c), res.Message))
		}
	}
	return failed, waiting
}

// progressOnly reports whether b's status differs from a's only in progress: the named
// progress fields and the conditions' messages. Condition statuses and reasons, the observed
// generation, the inventory and every other field are significant.
func progressOnly(a, b *unstructured.Unstructured, progress []string) bool {
	return jsonEqual(significant(a, progress), significant(b, progress))
}

func significant(obj *unstructured.Unstructured, progress []string) map[string]any {
	st, _, _ := unstructured.NestedMap(obj.Object, "status")
	if st == nil {
		return nil
	}
	for _, f := range progress {
		delete(st, f)
	}
	conds, _ := st["conditions"].([]any)
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok {
			delete(m, "message")
		}
	}
	return st
}

// equalStatus reports whether two objects carry the same status.
func equalStatus(a, b *unstructured.Unstructured) bool {
	as, _, _ := unstructured.NestedFieldNoCopy(a.Object, "status")
	bs, _, _ := unstructured.NestedFieldNoCopy(b.Object, "status")
	return jsonEqual(as, bs)
}

// jsonEqual compares two JSON-like values (from unstructured objects).
func jsonEqual(a, b any) bool {
	if isEmptyJSON(a) && isEmptyJSON(b) {
		return true
	}
	return equality.Semantic.DeepEqual(a, b)
}

func isEmptyJSON(v any) bool {
	switch t := v.(type) {
	case nil:
		return true
	case map[string]any:
		return len(t) == 0
	}
	return false
}

// Rendered reports whether the engine rendered generation of a resource whose status has
// observedGeneration and conditions: it observed that generation, and not as a spec that
// failed to render (a Stalled RenderFailed or ValuesInvalid observes its generation too, for
// GitOps tools to read it as failed).
func Rendered(generation, observedGeneration int64, conditions []metav1.Condition) bool {
	if generation == 0 || observedGeneration != generation {
		return false
	}
	c := meta.FindStatusCondition(conditions, infrav1alpha1.ConditionStalled)
	return c == nil || c.Status != metav1.ConditionTrue ||
		(c.Reason != infrav1alpha1.ReasonRenderFailed && c.Reason != infrav1alpha1.ReasonValuesInvalid)
}
