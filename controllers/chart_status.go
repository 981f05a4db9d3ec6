package controllers

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/render"
)

// engineStatus is the part of a custom resource's status the engine owns. Kinds add their own
// fields next to it (Lifecycle.Status).
type engineStatus struct {
	ObservedGeneration int64                    `json:"observedGeneration,omitempty"`
	Conditions         []metav1.Condition       `json:"conditions,omitempty"`
	Inventory          *infrav1alpha1.Inventory `json:"inventory,omitempty"`
}

func readStatus(obj *unstructured.Unstructured) (engineStatus, error) {
	var st engineStatus
	m, _, err := unstructured.NestedMap(obj.Object, "status")
	if err != nil || m == nil {
		return st, err
	}
	err = runtime.DefaultUnstructuredConverter.FromUnstructured(m, &st)
	return st, err
}

// writeStatus sets the engine's fields and the kind's extra fields into obj's status, keeping
// any other fields already there.
func writeStatus(obj *unstructured.Unstructured, st engineStatus, extra map[string]any) error {
	m, _, err := unstructured.NestedMap(obj.Object, "status")
	if err != nil {
		return err
	}
	if m == nil {
		m = map[string]any{}
	}
	own, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&st)
	if err != nil {
		return err
	}
	for _, k := range []string{"observedGeneration", "conditions", "inventory"} {
		delete(m, k)
	}
	for k, v := range own {
		m[k] = v
	}
	for k, v := range extra {
		if v == nil {
			delete(m, k) // a field the kind cleared
			continue
		}
		m[k] = runtime.DeepCopyJSONValue(v)
	}
	return unstructured.SetNestedMap(obj.Object, m, "status")
}

// outcome is what a reconcile found; the conditions are computed from it alone.
type outcome struct {
	generation int64
	// err and reason describe a failure; nil when the reconcile succeeded.
	err    error
	reason string
	// children are the live children after apply.
	children []*unstructured.Unstructured
	paused   bool
	deleting bool
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

// setConditions sets Ready, Progressing and Degraded on conds from the outcome.
func setConditions(conds *[]metav1.Condition, o outcome) {
	set := func(t string, s metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(conds, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: o.generation})
	}
	ready, progressing, degraded := summarize(o)
	set(infrav1alpha1.ConditionReady, ready.status, ready.reason, ready.message)
	set(infrav1alpha1.ConditionProgressing, progressing.status, progressing.reason, progressing.message)
	set(infrav1alpha1.ConditionDegraded, degraded.status, degraded.reason, degraded.message)
}

type cond struct {
	status  metav1.ConditionStatus
	reason  string
	message string
}

func summarize(o outcome) (ready, progressing, degraded cond) {
	t, f := metav1.ConditionTrue, metav1.ConditionFalse
	switch {
	case o.deleting:
		msg := "deleting the children"
		return cond{f, infrav1alpha1.ReasonDeleting, msg}, cond{t, infrav1alpha1.ReasonDeleting, msg}, cond{f, infrav1alpha1.ReasonDeleting, msg}
	case o.paused:
		msg := "reconciliation is paused by the " + infrav1alpha1.PauseAnnotation + " annotation"
		return cond{f, infrav1alpha1.ReasonPaused, msg}, cond{f, infrav1alpha1.ReasonPaused, msg}, cond{f, infrav1alpha1.ReasonPaused, msg}
	case o.err != nil:
		msg := o.err.Error()
		return cond{f, o.reason, msg}, cond{f, o.reason, msg}, cond{t, o.reason, msg}
	}
	failed, waiting := childProblems(o.children)
	switch {
	case len(failed) > 0:
		msg := strings.Join(failed, "; ")
		return cond{f, infrav1alpha1.ReasonChildFailed, msg}, cond{f, infrav1alpha1.ReasonChildFailed, msg}, cond{t, infrav1alpha1.ReasonChildFailed, msg}
	case len(waiting) > 0:
		msg := "waiting for " + strings.Join(waiting, "; ")
		return cond{f, infrav1alpha1.ReasonApplying, msg}, cond{t, infrav1alpha1.ReasonApplying, msg}, cond{f, infrav1alpha1.ReasonApplying, msg}
	}
	msg := fmt.Sprintf("%d children are ready", len(o.children))
	return cond{t, infrav1alpha1.ReasonReconciled, msg}, cond{f, infrav1alpha1.ReasonReconciled, msg}, cond{f, infrav1alpha1.ReasonReconciled, msg}
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
