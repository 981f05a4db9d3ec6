// Package quantity holds the rules for resource quantities the operator compares with its
// limits.
package quantity

import (
	"math"

	"k8s.io/apimachinery/pkg/api/resource"
)

// OutOfRange reports whether q is beyond float64's range, like 1e999999999, which parses. Such
// a quantity must never be compared: Quantity.Cmp brings both sides to one exponent, here a
// number of a billion digits, which takes hours of CPU and gigabytes.
func OutOfRange(q resource.Quantity) bool {
	f := q.AsApproximateFloat64()
	return math.IsInf(f, 0) || math.IsNaN(f) // NaN: zero with such an exponent (0 × Inf)
}
