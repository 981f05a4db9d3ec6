package engine

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// keepClaims is a kind whose Demo keeps its claim past a delete and reports how many children
// it saw: every optional interface the engine asks through statusOf and retainedOf.
type keepClaims struct{ ChartOnly }

func (keepClaims) Retain(_ *unstructured.Unstructured, children []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	var keep []*unstructured.Unstructured
	for _, c := range children {
		if c.GetKind() == "PersistentVolumeClaim" {
			keep = append(keep, c)
		}
	}
	return keep, nil
}

func (keepClaims) Status(_ *unstructured.Unstructured, observed Observed) (StatusResult, error) {
	return StatusResult{Fields: map[string]any{"children": int64(len(observed.Children))}}, nil
}

// TestOptionalLifecycleMethods: a kind with values alone (ChartOnly) has no status
// fields of its own and keeps no child; a kind that implements StatusReporter and Retainer is
// asked, and its answers and errors are the engine's.
func TestOptionalLifecycleMethods(t *testing.T) {
	claim := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "PersistentVolumeClaim"}}
	config := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}}
	children := []*unstructured.Unstructured{config, claim}
	res, err := statusOf(ChartOnly{}, unitDemo(nil), Observed{Children: children})
	if err != nil || res.Fields != nil || res.Failure != "" || res.RequeueAfter != 0 {
		t.Errorf("ChartOnly: status %+v, %v; want none", res, err)
	}
	if keep, err := retainedOf(ChartOnly{}, unitDemo(nil), children); err != nil || keep != nil {
		t.Errorf("ChartOnly: keeps %v, %v; want nothing", keep, err)
	}
	res, err = statusOf(keepClaims{}, unitDemo(nil), Observed{Children: children})
	if err != nil || res.Fields["children"] != int64(2) {
		t.Errorf("a StatusReporter's status: %+v, %v", res, err)
	}
	if keep, err := retainedOf(keepClaims{}, unitDemo(nil), children); err != nil || len(keep) != 1 || keep[0] != claim {
		t.Errorf("a Retainer keeps %v, %v; want the claim", keep, err)
	}
}
