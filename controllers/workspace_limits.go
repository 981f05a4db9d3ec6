package controllers

import (
	"fmt"
	"math"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
)

// WorkspaceLimits are the most one workspace may ask for: the operator's policy, set by its
// flags, on top of the CRD's hard ceilings. A zero field means the default.
type WorkspaceLimits struct {
	CPU, Memory, Storage resource.Quantity
}

// DefaultWorkspaceLimits are the limits when the operator sets none: 8 CPUs, 32Gi of memory,
// 200Gi of storage.
func DefaultWorkspaceLimits() WorkspaceLimits {
	return WorkspaceLimits{CPU: resource.MustParse("8"), Memory: resource.MustParse("32Gi"), Storage: resource.MustParse("200Gi")}
}

// Check returns the first field of spec over its limit, named by its path in the Workspace.
func (l WorkspaceLimits) Check(spec *infrav1alpha1.WorkspaceSpec) *field.Error {
	d := DefaultWorkspaceLimits()
	for _, c := range []struct {
		path       *field.Path
		value      *resource.Quantity
		max, deflt resource.Quantity
	}{
		{field.NewPath("spec", "resources", "cpu"), spec.Resources.CPU, l.CPU, d.CPU},
		{field.NewPath("spec", "resources", "memory"), spec.Resources.Memory, l.Memory, d.Memory},
		{field.NewPath("spec", "storage", "size"), spec.Storage.Size, l.Storage, d.Storage},
	} {
		maxQ := c.max
		if maxQ.IsZero() {
			maxQ = c.deflt
		}
		switch {
		case c.value == nil:
		case outOfRange(*c.value):
			return field.Invalid(c.path, c.value.String(), "out of range")
		case c.value.Cmp(maxQ) > 0:
			return field.Invalid(c.path, c.value.String(), fmt.Sprintf("exceeds the most a workspace may have here (%s)", maxQ.String()))
		}
	}
	return nil
}

// outOfRange reports whether q is beyond float64's range, like 1e999999999, which parses. Such
// a quantity must never be compared: Quantity.Cmp brings both sides to one exponent, here a
// number of a billion digits, which takes hours of CPU and gigabytes.
func outOfRange(q resource.Quantity) bool {
	f := q.AsApproximateFloat64()
	return math.IsInf(f, 0) || math.IsNaN(f) // NaN: zero with such an exponent (0 × Inf)
}
