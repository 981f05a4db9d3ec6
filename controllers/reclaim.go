package controllers

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
)

// volumesToRetain is what a kind with a reclaim policy keeps of children past its resource
// (engine.Retainer): the PersistentVolumeClaims when policy is Retain, where the user's data
// lives, for a later resource of the same name to adopt; nothing otherwise. Workspace and
// VirtualMachine share it; each reads its own policy field, the kinds' API, so the engine stays
// kind-agnostic.
func volumesToRetain(policy infrav1alpha1.ReclaimPolicy, children []*unstructured.Unstructured) []*unstructured.Unstructured {
	if policy != infrav1alpha1.ReclaimRetain {
		return nil
	}
	var keep []*unstructured.Unstructured
	for _, c := range children {
		if c.GetKind() == "PersistentVolumeClaim" {
			keep = append(keep, c)
		}
	}
	return keep
}
