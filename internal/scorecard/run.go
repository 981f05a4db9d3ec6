package scorecard

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cloudspace-dev/cloudspace-operator/internal/inspect"
)

// pollInterval is how often an example is looked at while the tests wait for it.
const pollInterval = 500 * time.Millisecond

// runExample creates ex, waits until it is Ready, runs each test's checks, deletes it and waits
// until it is gone; children its reclaim policy kept are deleted last, so that a run leaves the
// namespace as it found it. It returns the problems found, per test: a problem of the run
// itself (not created, never Ready, not deleted) is every test's.
func runExample(ctx context.Context, env *Env, tests []Test, ex Example) [][]string {
	perTest := make([][]string, len(tests))
	every := func(problems ...string) [][]string {
		for i := range perTest {
			perTest[i] = append(perTest[i], problems...)
		}
		return perTest
	}
	obj := ex.Object.DeepCopy()
	obj.SetNamespace(env.Namespace)
	if err := env.Client.Create(ctx, obj); err != nil {
		return every(fmt.Sprintf("creating it: %v", err))
	}
	env.Log("%s %s/%s: created", obj.GetKind(), obj.GetNamespace(), obj.GetName())
	live, problems := waitReady(ctx, env, obj)
	every(problems...)
	for i, t := range tests {
		if len(problems) == 0 && t.Check != nil {
			perTest[i] = append(perTest[i], t.Check(ex, live)...)
		}
	}
	children, err := inspect.Inventory(live)
	if err != nil {
		every(err.Error())
	}
	if gone := deleteAndWait(ctx, env, live); gone != "" {
		return every(gone)
	}
	for i, t := range tests {
		if t.Deleted != nil {
			perTest[i] = append(perTest[i], t.Deleted(ctx, env, live, children)...)
		}
	}
	return every(deleteReleased(ctx, env, live, children)...)
}

// waitReady waits until obj reports Ready=True for its generation, and returns it as last seen.
func waitReady(ctx context.Context, env *Env, obj *unstructured.Unstructured) (*unstructured.Unstructured, []string) {
	live := obj.DeepCopy()
	start := time.Now()
	err := wait.PollUntilContextTimeout(ctx, pollInterval, env.Timeout, true, func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), live); err != nil {
			return false, nil
		}
		return inspect.IsReady(live), nil
	})
	if err != nil {
		return live, []string{fmt.Sprintf("not Ready within %s: %s", env.Timeout, inspect.Conditions(live))}
	}
	env.Log("%s %s: Ready after %s", obj.GetKind(), obj.GetName(), time.Since(start).Round(100*time.Millisecond))
	return live, nil
}

// deleteAndWait deletes obj and waits until its finalizer has run and it is gone; it returns
// why not, or "".
func deleteAndWait(ctx context.Context, env *Env, obj *unstructured.Unstructured) string {
	if err := env.Client.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Sprintf("deleting it: %v", err)
	}
	last := obj.DeepCopy()
	err := wait.PollUntilContextTimeout(ctx, pollInterval, env.Timeout, true, func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), last)
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		return fmt.Sprintf("still there %s after it was deleted (finalizers %v): %s", env.Timeout, last.GetFinalizers(), inspect.Conditions(last))
	}
	env.Log("%s %s: deleted", obj.GetKind(), obj.GetName())
	return ""
}

// leftovers is the orphan test: after owner was deleted, each of its children is gone or was
// released by its reclaim policy, and no object of a child kind still names owner as its owner.
func leftovers(ctx context.Context, env *Env, owner *unstructured.Unstructured, children []inspect.Child) []string {
	var problems []string
	for _, kind := range childKinds(children) {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(kind.GroupVersion().WithKind(kind.Kind + "List"))
		if err := env.Client.List(ctx, list, client.InNamespace(owner.GetNamespace())); err != nil {
			problems = append(problems, fmt.Sprintf("listing %s: %v", kind.Kind, err))
			continue
		}
		for i := range list.Items {
			switch Left(&list.Items[i], owner) {
			case Orphan:
				problems = append(problems, fmt.Sprintf("%s %s was left behind", kind.Kind, list.Items[i].GetName()))
			case Released:
				env.Log("%s %s: kept by its reclaim policy, released", kind.Kind, list.Items[i].GetName())
			}
		}
	}
	return problems
}

// deleteReleased deletes the children owner's reclaim policy kept, once the test has seen them.
func deleteReleased(ctx context.Context, env *Env, owner *unstructured.Unstructured, children []inspect.Child) []string {
	var problems []string
	for _, c := range children {
		obj := &unstructured.Unstructured{}
		obj.SetGroupVersionKind(c.GVK)
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.Name}, obj); err != nil {
			continue
		}
		if Left(obj, owner) != Released {
			continue
		}
		uid := obj.GetUID()
		err := env.Client.Delete(ctx, obj, client.Preconditions{UID: &uid})
		if err != nil && !apierrors.IsNotFound(err) {
			problems = append(problems, fmt.Sprintf("cleaning up %s %s: %v", c.GVK.Kind, c.Name, err))
		}
	}
	return problems
}
