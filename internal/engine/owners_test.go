package engine

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cloudspace-dev/cloudspace-operator/internal/engine/objcache"
)

const servedUID = types.UID("served-uid")

func labelled(extra map[string]string) map[string]string {
	l := map[string]string{LabelManagedBy: ManagedByValue, LabelInstance: "ws"}
	for k, v := range extra {
		l[k] = v
	}
	return l
}

func secret(refs []metav1.OwnerReference, annotations map[string]string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "team", Name: "s", UID: "s-uid", ResourceVersion: "7",
			Labels:          labelled(map[string]string{"pad": strings.Repeat("p", 63)}),
			Annotations:     annotations,
			OwnerReferences: refs,
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
		},
		Data: map[string][]byte{"pad": []byte(strings.Repeat("x", 900<<10))},
	}
}

func controllerRef(uid types.UID) []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: "infra.cloudspace.dev/v1alpha1", Kind: "Workspace", Name: "ws", UID: uid, Controller: ptr.To(true)}}
}

// TestTheChildCacheKeepsWholeOnlyWhatALiveResourceHolds is the labelled-Secret attack on the
// cache's transform: anyone may label their own Secret as ours, forge a controller reference or
// a retained-for record; only a UID of a live resource we serve keeps an object whole.
func TestTheChildCacheKeepsWholeOnlyWhatALiveResourceHolds(t *testing.T) {
	held := servedOwner("s")
	renamed := secret(controllerRef(servedUID), nil)
	renamed.Name = "not-rendered"
	elsewhere := secret(controllerRef(servedUID), nil)
	elsewhere.Namespace = "other-team"
	cases := []struct {
		name  string
		obj   *corev1.Secret
		whole bool
	}{
		{"labelled, no owner", secret(nil, nil), false},
		{"a controller reference to an unknown UID", secret(controllerRef("someone-else"), nil), false},
		{"a retained-for record of an unknown UID", secret(nil, map[string]string{AnnotationRetainedFor: "workspace.infra.cloudspace.dev/ws/nobody"}), false},
		// The owner's own tenant knows its UID: a reference to it holds only what it rendered.
		{"a forged reference to a live resource, another name", renamed, false},
		{"a forged reference to a live resource, another namespace", elsewhere, false},
		{"controlled by a live resource that rendered it", secret(controllerRef(servedUID), nil), true},
		{"retained for a live resource that rendered it", secret(nil, map[string]string{AnnotationRetainedFor: "workspace.infra.cloudspace.dev/ws/" + string(servedUID)}), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := childTransform(held)(tc.obj.DeepCopy())
			if err != nil {
				t.Fatal(err)
			}
			got := out.(*corev1.Secret)
			if len(got.ManagedFields) != 0 {
				t.Errorf("managedFields kept: %v", got.ManagedFields)
			}
			if whole := len(got.Data["pad"]) == 900<<10 && !objcache.Trimmed(got); whole != tc.whole {
				t.Fatalf("kept whole: %v, want %v (data %d bytes, annotations %v)", whole, tc.whole, len(got.Data["pad"]), got.Annotations)
			}
			if !tc.whole {
				checkStub(t, tc.obj, got)
			}
		})
	}
}

// checkStub checks that a stub says no more, and no less, than who holds the object.
func checkStub(t *testing.T, in, got client.Object) {
	t.Helper()
	if !objcache.Trimmed(got) || got.GetName() != in.GetName() || got.GetNamespace() != in.GetNamespace() ||
		got.GetUID() != in.GetUID() || got.GetResourceVersion() != in.GetResourceVersion() {
		t.Errorf("stub lost who it is: %+v", got)
	}
	if len(got.GetLabels()) != 2 || got.GetLabels()[LabelManagedBy] != ManagedByValue {
		t.Errorf("stub labels: %v, want only the engine's", got.GetLabels())
	}
	if claimOf(got, &unstructured.Unstructured{}) != claimOf(in, &unstructured.Unstructured{}) || ownerOf(got) != ownerOf(in) {
		t.Errorf("stub says %q, the object %q", ownerOf(got), ownerOf(in))
	}
}

// TestAPodKeepsOnlyWhatTheKindsRead: the pods the chart's workloads run are mapped by label
// and read for their status, so their spec and annotations, which the pod's author sets at any
// size, are not cached; a pod that is itself a child is.
func TestAPodKeepsOnlyWhatTheKindsRead(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: labelled(map[string]string{"big": "x"}), Annotations: map[string]string{"pad": strings.Repeat("a", 1<<20)}},
		Spec:       corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c", Env: []corev1.EnvVar{{Name: "PAD", Value: strings.Repeat("e", 1<<20)}}}}},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1", ContainerStatuses: []corev1.ContainerStatus{{Name: "c", RestartCount: 3}}},
	}
	pod.Namespace, pod.Finalizers = "team", []string{strings.Repeat("f", 300)}
	out, err := childTransform(newOwners(clientgoscheme.Scheme))(pod.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*corev1.Pod)
	if len(got.Spec.Containers) != 0 || len(got.Annotations) != 1 || !objcache.Trimmed(got) || got.Labels["big"] != "" || got.Finalizers != nil {
		t.Errorf("kept what nobody reads, or not marked: spec %d containers, annotations %v, labels %v, finalizers %v", len(got.Spec.Containers), got.Annotations, got.Labels, got.Finalizers)
	}
	if got.Spec.NodeName != "n1" || got.Status.PodIP != "10.0.0.1" || got.Status.ContainerStatuses[0].RestartCount != 3 || got.Labels[LabelInstance] != "ws" {
		t.Errorf("lost what the kinds read: %+v", got)
	}
	held := servedOwner("p")
	held.expect(&metav1.ObjectMeta{UID: servedUID, Namespace: "team"}, []string{"team_p__Pod"})
	child := pod.DeepCopy()
	child.OwnerReferences = controllerRef(servedUID)
	out, err = childTransform(held)(child)
	if err != nil {
		t.Fatal(err)
	}
	if got := out.(*corev1.Pod); len(got.Spec.Containers) != 1 || len(got.Annotations) != 1 || objcache.Trimmed(got) {
		t.Errorf("a pod that is a child lost its spec or annotations: %+v", got)
	}
}

// childTransform is the child cache's transform, before compaction, over held's record.
func childTransform(held *owners) toolscache.TransformFunc {
	return childTrim.Transform(held.holds)
}

// servedOwner is an owner record holding one live resource (servedUID, namespace team) that
// rendered a Secret named secret.
func servedOwner(secret string) *owners {
	held := newOwners(clientgoscheme.Scheme)
	held.fromInventory(&unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"uid": string(servedUID), "namespace": "team"},
		"status":   map[string]any{"inventory": map[string]any{"entries": []any{map[string]any{"id": "team_" + secret + "__Secret", "v": "v1"}}}},
	}})
	return held
}
