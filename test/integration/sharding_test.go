package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/engine"
	"github.com/cloudspace-dev/cloudspace-operator/internal/watches"
	"github.com/cloudspace-dev/cloudspace-operator/test/framework"
)

// shard is an operator serving the Demos labelled unservedLabel=label (which the suite's own
// operator leaves alone) in namespaces (every one when empty), writing as field manager name.
type shard struct {
	name, label string
	namespaces  []string
	mgr         *runningManager
}

func (s *shard) start(t *testing.T) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "watches.yaml")
	if err := framework.WriteDemoWatches(path, map[string]string{unservedLabel: s.label}); err != nil {
		t.Fatal(err)
	}
	ws, err := watches.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if s.mgr, err = startManagerOf(ws, false, []engine.Option{engine.WithFieldManager(s.name)}, s.namespaces...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.stop(t) })
}

func (s *shard) stop(t *testing.T) {
	t.Helper()
	if s.mgr == nil {
		return
	}
	if err := s.mgr.stop(); err != nil {
		t.Error(err)
	}
	s.mgr = nil
}

// TestShardsBySelectorTouchOnlyTheirOwn: two operators that split a kind by the watches.yaml
// selector each write only their own resources and children.
func TestShardsBySelectorTouchOnlyTheirOwn(t *testing.T) {
	ns := newNamespace(t)
	testShards(t, &shard{name: "shard-a", label: "shard-a"}, &shard{name: "shard-b", label: "shard-b"}, ns, ns)
}

// TestShardsByNamespaceTouchOnlyTheirOwn: the same for two operators that split the cluster by
// WATCH_NAMESPACE, with the same selector.
func TestShardsByNamespaceTouchOnlyTheirOwn(t *testing.T) {
	nsA, nsB := newNamespace(t), newNamespace(t)
	testShards(t, &shard{name: "shard-a", label: "shards", namespaces: []string{nsA}},
		&shard{name: "shard-b", label: "shards", namespaces: []string{nsB}}, nsA, nsB)
}

// testShards runs shards a and b, a Demo of each in nsA and nsB, and checks that each is
// written by its own shard alone, and that a Demo being deleted is torn down by its own shard
// alone: while that shard is down it waits, whoever else runs.
func testShards(t *testing.T, a, b *shard, nsA, nsB string) {
	a.start(t)
	b.start(t)
	demos := map[*shard]*demoRef{}
	for s, ns := range map[*shard]string{a: nsA, b: nsB} {
		demo := newDemo(ns, s.name+"-demo", map[string]any{"greeting": "hi"})
		demo.SetLabels(map[string]string{unservedLabel: s.label})
		if err := k8sClient.Create(context.Background(), demo); err != nil {
			t.Fatal(err)
		}
		demos[s] = &demoRef{ns, demo.GetName(), demo}
	}
	for _, s := range []*shard{a, b} {
		d := demos[s]
		eventually(t, timeout, func() error {
			return hasCondition(d.obj.(*unstructured.Unstructured), infrav1alpha1.ConditionReady, metav1.ConditionTrue, infrav1alpha1.ReasonReconciled)
		})
		if got := d.obj.GetAnnotations()[infrav1alpha1.ServedByAnnotation]; got != unservedLabel+"="+s.label {
			t.Errorf("%s: %s = %q, want its shard's selector", d.name, infrav1alpha1.ServedByAnnotation, got)
		}
		for _, obj := range []client.Object{d.obj, demoConfig(d)} {
			if err := writtenOnlyBy(obj, s.name); err != nil {
				t.Error(err)
			}
		}
	}

	a.stop(t)
	if err := k8sClient.Delete(context.Background(), demos[a].obj); err != nil {
		t.Fatal(err)
	}
	consistently(t, 3*time.Second, func() error {
		if err := get(demos[a].obj); err != nil {
			return fmt.Errorf("the Demo of a stopped shard: %w", err)
		}
		return get(demoConfig(demos[a]))
	})
	a.start(t)
	for _, obj := range []client.Object{demoConfig(demos[a]), demos[a].obj} {
		eventually(t, timeout, func() error { return gone(obj) })
	}
	if err := writtenOnlyBy(demos[b].obj, b.name); err != nil {
		t.Error(err)
	}
}

func demoConfig(d *demoRef) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: d.ns, Name: d.name + "-config"}}
}

// writtenOnlyBy fails when obj's managed fields name an operator other than manager: the
// other shard, or the suite's own operator.
func writtenOnlyBy(obj client.Object, manager string) error {
	if err := get(obj); err != nil {
		return err
	}
	for _, f := range obj.GetManagedFields() {
		switch f.Manager {
		case "shard-a", "shard-b", engine.DefaultFieldManager:
			if f.Manager != manager {
				return fmt.Errorf("%T %s was written by %s (%s), not by its shard %s", obj, obj.GetName(), f.Manager, f.Operation, manager)
			}
		}
	}
	return nil
}
