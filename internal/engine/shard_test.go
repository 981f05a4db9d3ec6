package engine

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
)

func shardObject(shardLabel, servedBy string, finalizer, deleting bool) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	if shardLabel != "" {
		u.SetLabels(map[string]string{"shard": shardLabel})
	}
	if servedBy != "" {
		u.SetAnnotations(map[string]string{infrav1alpha1.ServedByAnnotation: servedBy})
	}
	if finalizer {
		u.SetFinalizers([]string{infrav1alpha1.Finalizer})
	}
	if deleting {
		now := metav1.Now()
		u.SetDeletionTimestamp(&now)
	}
	return u
}

// The reconcilers of the shard tests: one serving shard=a, one the whole kind.
var (
	shardA = shardReconciler(labels.SelectorFromSet(labels.Set{"shard": "a"}))
	whole  = shardReconciler(labels.Everything())
)

func shardReconciler(selector labels.Selector) *reconciler {
	return &reconciler{selector: selector, shard: shardOf(selector)}
}

// shardCase is a reconciler, a resource, and what a predicate should say of them.
type shardCase struct {
	name string
	r    *reconciler
	obj  *unstructured.Unstructured
	want bool
}

func testShardPredicate(t *testing.T, what string, predicate func(*reconciler, client.Object) bool, cases []shardCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := predicate(tc.r, tc.obj); got != tc.want {
				t.Errorf("%s = %v, want %v", what, got, tc.want)
			}
		})
	}
}

func TestServesOnlyItsShard(t *testing.T) {
	testShardPredicate(t, "serves", (*reconciler).serves, []shardCase{
		{"matching the selector", shardA, shardObject("a", "", false, false), true},
		{"another shard's", shardA, shardObject("b", "shard=b", true, false), false},
		{"another shard's, being deleted", shardA, shardObject("b", "shard=b", true, true), false},
		{"ours relabelled out, live", shardA, shardObject("", "shard=a", true, false), false},
		{"ours relabelled out, being deleted", shardA, shardObject("", "shard=a", true, true), true},
		{"stamped ours but without our finalizer, being deleted", shardA, shardObject("", "shard=a", false, true), false},
		{"an operator without a selector serves everything", whole, shardObject("b", "shard=b", true, true), true},
	})
}

func TestSettledLeavesAnOverlappingShardAlone(t *testing.T) {
	testShardPredicate(t, "settled", (*reconciler).settled, []shardCase{
		{"ours", shardA, shardObject("a", "shard=a", true, false), true},
		{"without our finalizer", shardA, shardObject("a", "shard=a", false, false), false},
		{"never stamped", shardA, shardObject("a", "", true, false), false},
		{"relabelled from another shard", shardA, shardObject("a", "shard=b", true, false), false},
		{"another shard's selector still matches", whole, shardObject("b", "shard=b", true, false), true},
		{"an unparsable record", shardA, shardObject("a", "shard==(", true, false), false},
	})
}

func TestStampShard(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    *reconciler
		obj  *unstructured.Unstructured
		want string
	}{
		{"a new resource", shardA, shardObject("a", "", false, false), "shard=a"},
		{"handed over from another shard", shardA, shardObject("a", "shard=b", true, false), "shard=a"},
		{"handed over to an operator without a selector", whole, shardObject("a", "shard=b", true, false), ""},
		{"never stamped by an operator without a selector", whole, shardObject("a", "", false, false), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.r.stampShard(tc.obj)
			if got := tc.obj.GetAnnotations()[infrav1alpha1.ServedByAnnotation]; got != tc.want {
				t.Errorf("%s = %q, want %q", infrav1alpha1.ServedByAnnotation, got, tc.want)
			}
			if !tc.r.claimed(withFinalizer(tc.obj)) {
				t.Error("a stamped resource with our finalizer is not claimed")
			}
		})
	}
}

func withFinalizer(u *unstructured.Unstructured) *unstructured.Unstructured {
	u = u.DeepCopy()
	u.SetFinalizers([]string{infrav1alpha1.Finalizer})
	return u
}
