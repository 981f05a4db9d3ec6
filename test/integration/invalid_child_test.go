package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/engine"
	"github.com/cloudspace-dev/cloudspace-operator/internal/watches"
	"github.com/cloudspace-dev/cloudspace-operator/test/framework"
)

// invalidChildLabel selects the Demos served from test/testdata/charts/invalidchild (the
// suite's own operator leaves every Demo with unservedLabel alone).
const invalidChildLabel = "invalid-child"

// startInvalidChildOperator runs an operator that serves the Demos labelled invalidChildLabel
// from the invalidchild chart, whose PodTemplate carries spec.tier as a label value.
func startInvalidChildOperator(t *testing.T) {
	t.Helper()
	chart := filepath.Join(framework.RepoRoot(), "test", "testdata", "charts", "invalidchild")
	entry := fmt.Sprintf("- group: %s\n  version: %s\n  kind: %s\n  chart: %s\n  selector:\n    matchLabels:\n      %q: %q\n",
		framework.DemoGVK.Group, framework.DemoGVK.Version, framework.DemoGVK.Kind, chart, unservedLabel, invalidChildLabel)
	path := filepath.Join(t.TempDir(), "watches.yaml")
	if err := os.WriteFile(path, []byte(entry), 0o644); err != nil {
		t.Fatal(err)
	}
	ws, err := watches.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := startManagerOf(ws, false, []engine.Option{engine.WithFieldManager("invalid-child-operator")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := mgr.stop(); err != nil {
			t.Error(err)
		}
	})
}

// TestChildRefusedAsInvalidIsNotRetried: a tenant whose spec renders a child the API server
// refuses as invalid (a label value of 64 characters) gets a Degraded condition that says why,
// naming the field, and an event; the operator then stops writing until the spec changes,
// instead of retrying a write that cannot succeed forever. A valid spec heals it.
func TestChildRefusedAsInvalidIsNotRetried(t *testing.T) {
	startInvalidChildOperator(t)
	ns := newNamespace(t)
	demo := newDemo(ns, "hostile", map[string]any{"tier": strings.Repeat("t", 64)})
	demo.SetLabels(map[string]string{unservedLabel: invalidChildLabel})
	if err := k8sClient.Create(context.Background(), demo); err != nil {
		t.Fatal(err)
	}
	eventually(t, timeout, func() error {
		return hasCondition(demo, infrav1alpha1.ConditionDegraded, metav1.ConditionTrue, infrav1alpha1.ReasonApplyFailed)
	})
	if c := condition(demo, infrav1alpha1.ConditionDegraded); !strings.Contains(c.Message, "is invalid: metadata.labels") {
		t.Errorf("Degraded message %q does not say the child is invalid, naming the field metadata.labels", c.Message)
	}
	eventually(t, timeout, func() error { return invalidChildEvent(ns, demo.GetName()) })
	assertNoWrites(t, 5*time.Second, "podtemplates")

	if err := k8sClient.Patch(context.Background(), demo, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"tier":"web"}}`))); err != nil {
		t.Fatal(err)
	}
	eventually(t, timeout, func() error {
		return hasCondition(demo, infrav1alpha1.ConditionReady, metav1.ConditionTrue, infrav1alpha1.ReasonReconciled)
	})
	if err := get(&corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hostile"}}); err != nil {
		t.Errorf("the healed spec's child: %v", err)
	}
}

// invalidChildEvent finds the Warning event that reports the refused child on the Demo.
func invalidChildEvent(ns, name string) error {
	var events corev1.EventList
	if err := k8sClient.List(context.Background(), &events, client.InNamespace(ns)); err != nil {
		return err
	}
	for _, e := range events.Items {
		if e.InvolvedObject.Name == name && e.Type == corev1.EventTypeWarning && e.Reason == infrav1alpha1.EventChildInvalid {
			return nil
		}
	}
	return fmt.Errorf("no Warning event %s on %s among %d events", infrav1alpha1.EventChildInvalid, name, len(events.Items))
}

// assertNoWrites fails t if the API server serves any write request on resources within d:
// counted by the API server itself, so refused writes count too.
func assertNoWrites(t *testing.T, d time.Duration, resources ...string) {
	t.Helper()
	before, err := framework.APIWrites(context.Background(), clientset.RESTClient(), resources...)
	if err != nil {
		t.Fatal(err)
	}
	consistently(t, d, func() error {
		now, err := framework.APIWrites(context.Background(), clientset.RESTClient(), resources...)
		if err != nil {
			return err
		}
		for r, n := range now {
			if n != before[r] {
				return fmt.Errorf("%v more write requests on %s after the child was refused as invalid: it is retried", n-before[r], r)
			}
		}
		return nil
	})
}
