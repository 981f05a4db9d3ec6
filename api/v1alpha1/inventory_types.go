package v1alpha1

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
