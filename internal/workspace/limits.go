package workspace

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/quantity"
)

// Limits are the most one workspace may ask for: the operator's policy, set by its
// flags, on top of the CRD's hard ceilings. A zero field means the default.
type Limits struct {
	CPU, Memory, Storage resource.Quantity
}

// DefaultLimits are the limits when the operator sets none: 8 CPUs, 32Gi of memory,
// 200Gi of storage.
func DefaultLimits() Limits {
	return Limits{CPU: resource.MustParse("8"), Memory: resource.MustParse("32Gi"), Storage: resource.MustParse("200Gi")}
}

// Check returns the first field of spec over its limit, named by its path in the Workspace. An
// unset field counts as its default, which is what renders.
func (l Limits) Check(spec *infrav1alpha1.WorkspaceSpec) *field.Error {
	return l.check(spec, true)
}

// CheckStopped is Check for a workspace asked to stop: its storage only. A stopped IDE takes
// no CPU or memory, so limits on them never keep a workspace from scaling to zero; its volume
// stays, and rendering it would create or grow it.
func (l Limits) CheckStopped(spec *infrav1alpha1.WorkspaceSpec) *field.Error {
	return l.check(spec, false)
}

// check compares each field with its limit (the default limit where l sets none); resources
// says whether CPU and memory count.
func (l Limits) check(spec *infrav1alpha1.WorkspaceSpec, resources bool) *field.Error {
	d := DefaultLimits()
	type limit struct {
		path       *field.Path
		value      resource.Quantity
		max, deflt resource.Quantity
	}
	checks := []limit{{field.NewPath("spec", "storage", "size"), orQuantity(spec.Storage.Size, DefaultStorage), l.Storage, d.Storage}}
	if resources {
		checks = append([]limit{
			{field.NewPath("spec", "resources", "cpu"), orQuantity(spec.Resources.CPU, DefaultCPU), l.CPU, d.CPU},
			{field.NewPath("spec", "resources", "memory"), orQuantity(spec.Resources.Memory, DefaultMemory), l.Memory, d.Memory},
		}, checks...)
	}
	for _, c := range checks {
		maxQ := c.max
		if maxQ.IsZero() {
			maxQ = c.deflt
		}
		switch {
		case quantity.OutOfRange(c.value):
			return field.Invalid(c.path, c.value.String(), "out of range")
		case c.value.Cmp(maxQ) > 0:
			return field.Invalid(c.path, c.value.String(), fmt.Sprintf("exceeds the most a workspace may have here (%s)", maxQ.String()))
		}
	}
	return nil
}

// orQuantity is q, or the default d when q is unset or zero (as Values renders it).
func orQuantity(q *resource.Quantity, d string) resource.Quantity {
	if q == nil || q.IsZero() {
		return resource.MustParse(d)
	}
	return *q
}
