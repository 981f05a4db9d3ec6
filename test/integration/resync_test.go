package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/engine"
	"github.com/cloudspace-dev/cloudspace-operator/test/framework"
)

// The resources the operator writes for these kinds; other writers (the API server's own
// leases) are left out of the count.
var operatorResources = []string{"genericdaemons", "workspaces", "demos", "daemonsets", "deployments", "serviceaccounts",
	"configmaps", "services", "persistentvolumeclaims", "networkpolicies", "ingresses", "events"}

// TestForcedResyncMakesNoWrites restarts the operator, which re-reads and reconciles every CR
// from scratch with no memory of earlier work, and counts the write requests the API server
// served meanwhile: with nothing changed there must be none. The restarted operator serves
// only this test's namespace, so every reconcile counted is one of this test's resources.
func TestForcedResyncMakesNoWrites(t *testing.T) {
	const daemons, demos = 20, 10
	ns := newNamespace(t)
	for i := range daemons {
		newGenericDaemon(t, ns, fmt.Sprintf("gd-%d", i), infrav1alpha1.GenericDaemonSpec{
			Image: "busybox:1.36", Label: "logs", Args: []string{"sleep", "infinity"},
		})
	}
	var all []*unstructured.Unstructured
	for i := range demos {
		d := newDemo(ns, fmt.Sprintf("demo-%d", i), map[string]any{"greeting": "hi", "extra": i%2 == 0})
		if err := k8sClient.Create(context.Background(), d); err != nil {
			t.Fatal(err)
		}
		all = append(all, d)
	}
	for _, d := range all {
		eventually(t, timeout, func() error {
			return hasCondition(d, infrav1alpha1.ConditionReady, metav1.ConditionTrue, infrav1alpha1.ReasonReconciled)
		})
	}
	eventually(t, timeout, func() error { return allObserved(ns, daemons) })

	// The count starts once the old operator has stopped: earlier tests leave resources in
	// namespaces that never finish terminating here (envtest runs no namespace controller),
	// and its retries of those are none of this test's business.
	if err := operator.stop(); err != nil {
		t.Fatal(err)
	}
	writes := stableWrites(t)
	var err error
	if operator, err = startManager(ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { restartManager(t) })
	before := reconciles()
	eventually(t, timeout, func() error {
		if n := reconciles() - before; n < daemons+demos {
			return fmt.Errorf("%v reconciles of this test's resources since the restart, want at least %d", n, daemons+demos)
		}
		return nil
	})
	after := stableWrites(t)
	for r, n := range after {
		if n != writes[r] {
			t.Errorf("%s: %v write requests during the resync, want 0", r, n-writes[r])
		}
	}
}

// restartManager stops the operator and starts it again, serving namespaces (all when none).
func restartManager(t *testing.T, namespaces ...string) {
	t.Helper()
	if err := operator.stop(); err != nil {
		t.Fatal(err)
	}
	var err error
	if operator, err = startManager(namespaces...); err != nil {
		t.Fatal(err)
	}
}

func allObserved(ns string, want int) error {
	var list infrav1alpha1.GenericDaemonList
	if err := k8sClient.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		return err
	}
	n := 0
	for _, gd := range list.Items {
		if gd.Status.ObservedGeneration == gd.Generation && gd.Status.Inventory != nil {
			n++
		}
	}
	if n != want {
		return fmt.Errorf("%d of %d GenericDaemons observed", n, want)
	}
	return nil
}

// settle is how long the write counters must stand still to count as settled: longer than the
// status interval, the longest the operator puts a write off.
const settle = engine.DefaultStatusInterval + time.Second

// stableWrites waits until the write counters have not moved for settle, so that in-flight or
// deferred work is not mistaken for work caused by the resync, nor missed.
func stableWrites(t *testing.T) map[string]float64 {
	t.Helper()
	var last map[string]float64
	var since time.Time
	eventually(t, timeout+settle, func() error {
		cur, err := framework.APIWrites(context.Background(), clientset.RESTClient(), operatorResources...)
		if err != nil {
			return err
		}
		if last == nil || framework.Sum(last) != framework.Sum(cur) {
			last, since = cur, time.Now()
		}
		if still := time.Since(since); still < settle {
			return fmt.Errorf("write counters still for %s of %s: %v", still.Round(time.Millisecond), settle, cur)
		}
		return nil
	})
	return last
}

// reconciles is the operator's total reconcile count, from controller-runtime's metrics.
func reconciles() float64 {
	families, _ := metrics.Registry.Gather()
	var n float64
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			n += counterValue(m)
		}
	}
	return n
}

func counterValue(m *dto.Metric) float64 { return m.GetCounter().GetValue() }
