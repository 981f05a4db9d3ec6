package v1alpha1

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Inventory is the set of children the operator applied for a CR, in apply order.
type Inventory struct {
	// Entries are the applied children.
	// +listType=atomic
	Entries []InventoryEntry `json:"entries,omitempty"`
}

// InventoryEntry names one applied child.
type InventoryEntry struct {
	// ID is "<namespace>_<name>_<group>_<kind>", as in Flux and cli-utils inventories.
	ID string `json:"id"`
	// Version is the API version the child was applied with.
	Version string `json:"v"`
}

// NewInventoryEntry is the entry of the object of kind gvk, namespace and name.
func NewInventoryEntry(gvk schema.GroupVersionKind, namespace, name string) InventoryEntry {
	return InventoryEntry{ID: strings.Join([]string{namespace, name, gvk.Group, gvk.Kind}, "_"), Version: gvk.Version}
}

// Object is the inverse of NewInventoryEntry: the entry's kind, namespace and name.
func (e InventoryEntry) Object() (gvk schema.GroupVersionKind, namespace, name string, err error) {
	parts := strings.Split(e.ID, "_")
	if len(parts) != 4 || parts[1] == "" || parts[3] == "" || e.Version == "" {
		return gvk, "", "", fmt.Errorf("malformed inventory entry %q (version %q)", e.ID, e.Version)
	}
	return schema.GroupVersionKind{Group: parts[2], Version: e.Version, Kind: parts[3]}, parts[0], parts[1], nil
}
