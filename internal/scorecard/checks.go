package scorecard

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cloudspace-dev/cloudspace-operator/internal/engine"
	"github.com/cloudspace-dev/cloudspace-operator/internal/inspect"
)

// xPhaseReason marks the status field that says why a phase is what it is: empty when there
// is nothing to explain, so a Ready resource need not fill it in.
const xPhaseReason = "urn:alm:descriptor:io.kubernetes.phase:reason"

// transientStatus are status fields that hold a value only on the way to Ready, or only when
// an optional spec field asks for them, by kind.
var transientStatus = map[string][]string{
	// When the current start began: cleared once the IDE runs. The ingress host's claim: only
	// with spec.ingress.host. When an idle stop comes: only in its warning. Since when it is
	// untouched, stale, and to be deleted: only while stopped.
	"Workspace": {"startRequestedAt", "ingressHost", "ingressHostClaimedAt", "idleStopAt", "untouchedSince", "staleSince", "deleteAt"},
	// Since when the guest runs: only once it does. When an idle stop comes: only in its warning.
	// What its last hibernation came to: only with spec.stopAction Hibernate, once it stopped.
	"VirtualMachine": {"startedAt", "idleStopAt", "hibernation"},
}

// childKinds are the distinct kinds of children.
func childKinds(children []inspect.Child) []schema.GroupVersionKind {
	var out []schema.GroupVersionKind
	for _, c := range children {
		if !slices.Contains(out, c.GVK) {
			out = append(out, c.GVK)
		}
	}
	return out
}

// Leftover says what an object found after a resource was deleted is to that resource.
type Leftover int

const (
	// Unrelated: not the resource's child.
	Unrelated Leftover = iota
	// Released: a child its reclaim policy kept, handed back by the operator: no owner
	// reference, no managed-by label, the retained-for record naming the deleted resource.
	Released
	// Orphan: a child that should have been deleted with the resource.
	Orphan
)

// Left classifies obj, found after owner was deleted.
func Left(obj, owner *unstructured.Unstructured) Leftover {
	for _, ref := range obj.GetOwnerReferences() {
		if ref.UID == owner.GetUID() {
			return Orphan
		}
	}
	record := obj.GetAnnotations()[engine.AnnotationRetainedFor]
	if !strings.HasSuffix(record, "/"+owner.GetName()+"/"+string(owner.GetUID())) {
		return Unrelated
	}
	if obj.GetLabels()[engine.LabelManagedBy] == engine.ManagedByValue {
		return Orphan // kept, but never released: the operator still claims it
	}
	return Released
}

// unfilledStatus is the status descriptor test: every field a status descriptor of the
// example's kind names holds a value, but for those that only explain a phase or only hold one
// on the way to Ready.
func unfilledStatus(ex Example, live *unstructured.Unstructured) []string {
	var problems []string
	for _, d := range ex.Description.StatusDescriptors {
		if slices.Contains(d.XDescriptors, xPhaseReason) || slices.Contains(transientStatus[ex.Description.Kind], d.Path) {
			continue
		}
		v, found, _ := unstructured.NestedFieldNoCopy(live.Object, append([]string{"status"}, strings.Split(d.Path, ".")...)...)
		if !found || isEmpty(v) {
			problems = append(problems, fmt.Sprintf("status.%s (%s) is not filled in", d.Path, d.DisplayName))
		}
	}
	return problems
}

func isEmpty(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case string:
		return v == ""
	case []any:
		return len(v) == 0
	case map[string]any:
		return len(v) == 0
	}
	return false
}
