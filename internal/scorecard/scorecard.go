// Package scorecard holds the operator's own scorecard tests. Where scorecard's stock tests read
// the bundle only, these run the bundle's alm-examples on a live cluster with the operator
// running: every example becomes Ready, leaves nothing behind when deleted, and fills in the
// status its CSV describes. They report in scorecard's v1alpha3 TestStatus, so that they run
// as a scorecard test image (images/scorecard-tests) or as a local process against a cluster.
package scorecard

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	scapiv1alpha3 "github.com/operator-framework/api/pkg/apis/scorecard/v1alpha3"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cloudspace-dev/cloudspace-operator/internal/inspect"
)

// Env is what every test runs with.
type Env struct {
	// Client reaches the cluster the operator serves.
	Client client.Client
	// CSV is the bundle's ClusterServiceVersion: its alm-examples and owned-CRD descriptors.
	CSV *operatorsv1alpha1.ClusterServiceVersion
	// Namespace is where the examples are created (scorecard's SCORECARD_NAMESPACE).
	Namespace string
	// Timeout bounds each example: becoming Ready, and being deleted.
	Timeout time.Duration
	// Log receives a line per step, for the result's log.
	Log func(format string, args ...any)
}

// Test is one custom test. A run creates each example and waits until it is Ready, then deletes
// it and waits until it is gone; a test's Check looks at the Ready example, and its Deleted at
// what is left of it (its children, from its inventory); each returns the problems it found.
type Test struct {
	Name        string
	Description string
	Check       func(ex Example, live *unstructured.Unstructured) []string
	Deleted     func(ctx context.Context, env *Env, owner *unstructured.Unstructured, children []inspect.Child) []string
}

// Tests are the custom tests, by the names scorecard's configuration gives them.
var Tests = []Test{
	{
		Name:        "alm-examples-ready",
		Description: "every alm-example is reconciled to Ready=True for its generation",
	},
	{
		Name:        "alm-examples-leave-no-orphans",
		Description: "deleting an alm-example deletes every child, but for those its reclaim policy keeps, which are released",
		Deleted:     leftovers,
	},
	{
		Name:        "status-descriptors-filled",
		Description: "on a Ready alm-example, every field a status descriptor names is filled in",
		Check:       unfilledStatus,
	},
}

// Find returns the test of that name.
func Find(name string) (Test, bool) {
	for _, t := range Tests {
		if t.Name == name {
			return t, true
		}
	}
	return Test{}, false
}

// Run runs tests on every alm-example and reports one result per test, as scorecard does.
// Each example is created, made Ready and deleted once for all of them: in software emulation
// a VM's boot is most of a run, and the tests differ only in what they look at.
func Run(ctx context.Context, env *Env, tests ...Test) scapiv1alpha3.TestStatus {
	var logs strings.Builder
	env.Log = func(format string, args ...any) { fmt.Fprintf(&logs, format+"\n", args...) }
	results := make([]scapiv1alpha3.TestResult, len(tests))
	for i, t := range tests {
		results[i] = scapiv1alpha3.TestResult{Name: t.Name, State: scapiv1alpha3.PassState}
	}
	examples, err := Examples(env.CSV, suffix(tests))
	for _, ex := range examples {
		for i, problems := range runExample(ctx, env, tests, ex) {
			for _, problem := range problems {
				results[i].Errors = append(results[i].Errors, fmt.Sprintf("%s %s: %s", ex.Object.GetKind(), ex.Object.GetName(), problem))
			}
		}
	}
	for i := range results {
		switch {
		case err != nil:
			results[i].State, results[i].Errors = scapiv1alpha3.ErrorState, []string{err.Error()}
		case len(results[i].Errors) > 0:
			results[i].State = scapiv1alpha3.FailState
			results[i].Suggestions = []string{"look at the resource's conditions and events (kubectl describe), and at the operator's log"}
		}
		results[i].Log = logs.String()
	}
	return scapiv1alpha3.TestStatus{Results: results}
}

// suffix names a run's examples apart from those of runs in parallel in one namespace: a
// test's last word, or "all" for a run of several.
func suffix(tests []Test) string {
	if len(tests) != 1 {
		return "all"
	}
	return tests[0].Name[strings.LastIndex(tests[0].Name, "-")+1:]
}

// Example is one alm-example, named for the test that creates it, with its kind's description.
type Example struct {
	Object      *unstructured.Unstructured
	Description operatorsv1alpha1.CRDDescription
}

// Examples parses the CSV's alm-examples. Each is renamed "<name>-<suffix>", so that runs in
// parallel in one namespace never share a resource.
func Examples(csv *operatorsv1alpha1.ClusterServiceVersion, suffix string) ([]Example, error) {
	var objs []map[string]any
	if err := json.Unmarshal([]byte(csv.GetAnnotations()["alm-examples"]), &objs); err != nil {
		return nil, fmt.Errorf("reading the CSV's alm-examples: %w", err)
	}
	var out []Example
	for _, o := range objs {
		obj := &unstructured.Unstructured{Object: o}
		ex := Example{Object: obj}
		found := false
		for _, d := range csv.Spec.CustomResourceDefinitions.Owned {
			if d.Kind == obj.GetKind() && obj.GroupVersionKind().Version == d.Version {
				ex.Description, found = d, true
			}
		}
		if !found {
			return nil, fmt.Errorf("alm-example %s %s is of no kind the CSV owns", obj.GetKind(), obj.GetName())
		}
		obj.SetName(obj.GetName() + "-" + suffix)
		out = append(out, ex)
	}
	return out, nil
}
