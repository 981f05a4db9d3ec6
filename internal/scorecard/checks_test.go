package scorecard

import (
	"strings"
	"testing"

	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cloudspace-dev/cloudspace-operator/internal/engine"
)

func object(name string, mutate func(*unstructured.Unstructured)) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetAPIVersion("v1")
	u.SetKind("PersistentVolumeClaim")
	u.SetName(name)
	if mutate != nil {
		mutate(u)
	}
	return u
}

func TestLeftClassifiesWhatADeleteLeft(t *testing.T) {
	owner := object("ws", func(u *unstructured.Unstructured) { u.SetUID("uid-1") })
	record := "workspace.infra.cloudspace.dev/ws/uid-1"
	for _, tc := range []struct {
		name string
		obj  *unstructured.Unstructured
		want Leftover
	}{
		{"owned by the deleted resource", object("ws-home", func(u *unstructured.Unstructured) {
			u.SetOwnerReferences([]metav1.OwnerReference{{UID: "uid-1", Name: "ws"}})
		}), Orphan},
		{"released by the operator", object("ws-home", func(u *unstructured.Unstructured) {
			u.SetAnnotations(map[string]string{engine.AnnotationRetainedFor: record})
		}), Released},
		{"kept but still claimed", object("ws-home", func(u *unstructured.Unstructured) {
			u.SetAnnotations(map[string]string{engine.AnnotationRetainedFor: record})
			u.SetLabels(map[string]string{engine.LabelManagedBy: engine.ManagedByValue})
		}), Orphan},
		{"kept for an earlier resource of the same name", object("ws-home", func(u *unstructured.Unstructured) {
			u.SetAnnotations(map[string]string{engine.AnnotationRetainedFor: "workspace.infra.cloudspace.dev/ws/uid-0"})
		}), Unrelated},
		{"another resource's child", object("other", func(u *unstructured.Unstructured) {
			u.SetOwnerReferences([]metav1.OwnerReference{{UID: types.UID("uid-2"), Name: "other"}})
		}), Unrelated},
	} {
		if got := Left(tc.obj, owner); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestUnfilledStatusNamesEmptyFields(t *testing.T) {
	desc := operatorsv1alpha1.CRDDescription{Kind: "Workspace", StatusDescriptors: []operatorsv1alpha1.StatusDescriptor{
		{Path: "phase", DisplayName: "Phase"},
		{Path: "url", DisplayName: "URL"},
		{Path: "conditions", DisplayName: "Conditions"},
		{Path: "message", XDescriptors: []string{xPhaseReason}},
		{Path: "startRequestedAt"},
	}}
	live := object("ws", func(u *unstructured.Unstructured) {
		u.Object["status"] = map[string]any{"phase": "Running", "url": "", "conditions": []any{}}
	})
	problems := unfilledStatus(Example{Description: desc}, live)
	got := strings.Join(problems, "\n")
	if len(problems) != 2 || !strings.Contains(got, "status.url") || !strings.Contains(got, "status.conditions") {
		t.Errorf("problems = %q, want status.url and status.conditions only", problems)
	}
}

func TestExamplesAreRenamedPerRun(t *testing.T) {
	csv := &operatorsv1alpha1.ClusterServiceVersion{}
	csv.SetAnnotations(map[string]string{"alm-examples": `[{"apiVersion":"infra.cloudspace.dev/v1alpha1","kind":"GenericDaemon","metadata":{"name":"syslog"},"spec":{"image":"x"}}]`})
	if _, err := Examples(csv, "ready"); err == nil || !strings.Contains(err.Error(), "no kind the CSV owns") {
		t.Errorf("an example of a kind the CSV does not own: %v", err)
	}
	csv.Spec.CustomResourceDefinitions.Owned = []operatorsv1alpha1.CRDDescription{{Kind: "GenericDaemon", Version: "v1alpha1"}}
	exs, err := Examples(csv, "orphans")
	if err != nil || len(exs) != 1 || exs[0].Object.GetName() != "syslog-orphans" {
		t.Fatalf("examples = %+v, %v", exs, err)
	}
}

func TestARunOfSeveralTestsNamesItsExamplesApart(t *testing.T) {
	for _, tc := range []struct {
		tests []string
		want  string
	}{
		{[]string{"alm-examples-ready"}, "ready"},
		{[]string{"alm-examples-leave-no-orphans"}, "orphans"},
		{[]string{"alm-examples-ready", "status-descriptors-filled"}, "all"},
	} {
		var tests []Test
		for _, name := range tc.tests {
			test, ok := Find(name)
			if !ok {
				t.Fatalf("no test %s", name)
			}
			tests = append(tests, test)
		}
		if got := suffix(tests); got != tc.want {
			t.Errorf("suffix(%v) = %q, want %q", tc.tests, got, tc.want)
		}
	}
}
