package main

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cloudspace-dev/cloudspace-operator/internal/engine"
	"github.com/cloudspace-dev/cloudspace-operator/test/framework"
)

// childKinds are the kinds the run's charts render (Demo: ConfigMap, Service; GenericDaemon:
// ServiceAccount, DaemonSet; Workspace: the rest).
var childKinds = []schema.GroupVersionKind{
	{Version: "v1", Kind: "ConfigMap"}, {Version: "v1", Kind: "Service"}, {Version: "v1", Kind: "ServiceAccount"},
	{Group: "apps", Version: "v1", Kind: "DaemonSet"}, {Group: "apps", Version: "v1", Kind: "Deployment"},
	{Version: "v1", Kind: "Secret"}, {Version: "v1", Kind: "PersistentVolumeClaim"},
	{Group: "networking.k8s.io", Version: "v1", Kind: "NetworkPolicy"},
}

// writtenResources are the resources the operator writes, whose API writes a quiet window counts.
var writtenResources = []string{"demos", "genericdaemons", "workspaces", "configmaps", "services", "serviceaccounts",
	"daemonsets", "deployments", "secrets", "persistentvolumeclaims", "networkpolicies", "events"}

// checkAfterStorm checks what the storm left: one live controller owner per child, no write in
// a quiet window, and nothing left once everything is deleted.
func (c *chaos) checkAfterStorm(ctx context.Context) error {
	r := c.report
	fail := func(format string, args ...any) { r.Failures = append(r.Failures, fmt.Sprintf(format, args...)) }
	if most := c.o.maxRatio*r.UndisturbedChangeSeconds + c.o.slack.Seconds(); r.ConvergedAfterLastFault > most {
		fail("converged %.1f s after the last fault: %.2fx the undisturbed change's %.1f s, want at most %.1fx plus %s", r.ConvergedAfterLastFault, r.ConvergenceRatio, r.UndisturbedChangeSeconds, c.o.maxRatio, c.o.slack)
	}
	w := r.WorkspaceCalls
	if w.Late > 0 || w.NotRunning > 0 || w.VolumesLost > 0 {
		fail("workspace calls: %s", w)
	}
	var err error
	if r.Orphans, r.Duplicates, err = c.owners(ctx, stormy); err != nil {
		return err
	}
	if r.Orphans+r.Duplicates > 0 {
		fail("%d children without a live controller owner, %d with several", r.Orphans, r.Duplicates)
	}
	fmt.Printf("chaos: quiet window of %s\n", c.o.quiet)
	if r.QuietWrites, err = c.quietWrites(ctx); err != nil {
		return err
	}
	if n := framework.Sum(r.QuietWrites); n > 0 {
		fail("%v writes in the quiet window: %v", n, r.QuietWrites)
	}
	fmt.Println("chaos: deleting everything")
	for _, ns := range []string{stormy, wsNamespace} {
		if err := c.deleteAll(ctx, ns); err != nil {
			return err
		}
	}
	if r.Leftovers, err = c.leftovers(ctx); err != nil {
		return err
	}
	if r.Leftovers > 0 {
		fail("%d children left after every resource was deleted", r.Leftovers)
	}
	return nil
}

// owners counts the operator's children in ns whose controller owner is not a live resource
// (orphans), and those with more than one controller owner.
func (c *chaos) owners(ctx context.Context, ns string) (orphans, several int, err error) {
	objs, err := c.resources(ctx, ns)
	if err != nil {
		return 0, 0, err
	}
	live := map[types.UID]bool{}
	for _, o := range objs {
		live[o.GetUID()] = true
	}
	children, err := c.children(ctx, ns)
	if err != nil {
		return 0, 0, err
	}
	for _, child := range children {
		controllers := 0
		for _, ref := range child.GetOwnerReferences() {
			if ref.Controller != nil && *ref.Controller {
				controllers++
				if !live[ref.UID] {
					orphans++
				}
			}
		}
		switch {
		case controllers == 0:
			orphans++
		case controllers > 1:
			several++
		}
	}
	return orphans, several, nil
}

// children lists the objects carrying the operator's managed-by label in ns (every namespace
// when empty).
func (c *chaos) children(ctx context.Context, ns string) ([]unstructured.Unstructured, error) {
	var out []unstructured.Unstructured
	for _, gvk := range childKinds {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		err := c.c.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{engine.LabelManagedBy: engine.ManagedByValue})
		if err != nil {
			return nil, fmt.Errorf("listing %ss: %w", gvk.Kind, err)
		}
		out = append(out, list.Items...)
	}
	return out, nil
}

// quietWrites counts the writes to what the operator writes over the quiet window.
func (c *chaos) quietWrites(ctx context.Context) (map[string]float64, error) {
	since := time.Now()
	before, err := framework.APIWrites(ctx, c.cs.RESTClient(), writtenResources...)
	if err != nil {
		return nil, err
	}
	time.Sleep(c.o.quiet)
	return c.writesSince(ctx, before, since)
}

// writesSince counts, by resource, the writes to what the operator writes since the API
// server's write counters read before (at since). The cluster's own controllers write events
// too, so events are the operator's own: those it recorded or repeated after since.
func (c *chaos) writesSince(ctx context.Context, before map[string]float64, since time.Time) (map[string]float64, error) {
	after, err := framework.APIWrites(ctx, c.cs.RESTClient(), writtenResources...)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for r, n := range after {
		if d := n - before[r]; d > 0 && r != "events" {
			out[r] = d
		}
	}
	events, err := c.cs.CoreV1().Events("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing events: %w", err)
	}
	for _, e := range events.Items {
		// Event times have whole seconds: one recorded in since's second is not counted.
		if e.Source.Component == engine.DefaultFieldManager && e.LastTimestamp.After(since) {
			out["events"]++
		}
	}
	return out, nil
}

// leftovers counts the operator's children left in the run's namespaces (the workspaces keep
// nothing: no volume is retained).
func (c *chaos) leftovers(ctx context.Context) (int, error) {
	n := 0
	for _, ns := range []string{calm, stormy, wsNamespace} {
		children, err := c.children(ctx, ns)
		if err != nil {
			return 0, err
		}
		n += len(children)
	}
	return n, nil
}
