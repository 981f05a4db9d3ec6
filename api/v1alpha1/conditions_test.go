package v1alpha1

import (
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestDegradedReasonsNameEveryFailure: every reason constant is in DegradedReasons but those of
// a resource that is fine, waiting, paused or being deleted, so that a reason added later gets
// its cloudspace_failures_total series too.
func TestDegradedReasonsNameEveryFailure(t *testing.T) {
	notFailures := []string{ReasonReconciled, ReasonApplying, ReasonPaused, ReasonDeleting}
	f, err := parser.ParseFile(token.NewFileSet(), "conditions.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var reasons []string
	ast.Inspect(f, func(n ast.Node) bool {
		spec, ok := n.(*ast.ValueSpec)
		if !ok || len(spec.Values) != 1 || !strings.HasPrefix(spec.Names[0].Name, "Reason") {
			return true
		}
		if lit, ok := spec.Values[0].(*ast.BasicLit); ok {
			v, _ := strconv.Unquote(lit.Value)
			reasons = append(reasons, v)
		}
		return true
	})
	if len(reasons) < len(DegradedReasons) {
		t.Fatalf("found %d reason constants in conditions.go, fewer than DegradedReasons' %d", len(reasons), len(DegradedReasons))
	}
	for _, r := range reasons {
		if failure := !slices.Contains(notFailures, r); failure != slices.Contains(DegradedReasons, r) {
			t.Errorf("reason %s: a failure is %v, but in DegradedReasons is %v", r, failure, !failure)
		}
	}
}
