package engine

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
)

func TestSubset(t *testing.T) {
	cases := []struct {
		name       string
		want, have any
		ok         bool
	}{
		{"equal scalars", "a", "a", true},
		{"int vs float", int64(80), float64(80), true},
		{"different numbers", int64(80), int64(81), false},
		{"defaulted extra field", map[string]any{"port": int64(80)}, map[string]any{"port": int64(80), "protocol": "TCP"}, true},
		{"missing field", map[string]any{"port": int64(80)}, map[string]any{}, false},
		{"empty map matches missing", map[string]any{"labels": map[string]any{}}, map[string]any{}, true},
		{"empty list matches missing", map[string]any{"args": []any{}}, map[string]any{}, true},
		{"nil matches anything", map[string]any{"x": nil}, map[string]any{"x": "set"}, true},
		{"list length differs", []any{"a"}, []any{"a", "b"}, false},
		{"list element defaulted", []any{map[string]any{"name": "c"}}, []any{map[string]any{"name": "c", "imagePullPolicy": "Always"}}, true},
		{"quantity by value", "0.5", "500m", true},
		{"quantity differs", "1Gi", "1G", false},
		{"string vs number", "80", int64(80), false},
		{"type mismatch", map[string]any{"a": "b"}, "a", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := subset(tc.want, tc.want, tc.have); got != tc.ok {
				t.Errorf("subset(%v, %v) = %v, want %v", tc.want, tc.have, got, tc.ok)
			}
		})
	}
}

// TestSubsetWithStoredForm: a rendered field missing from its stored form (the API server
// keeps no false that the type omits when empty) matches a live object without it, and only
// that: a value set by hand, or a field the stored form keeps, still counts.
func TestSubsetWithStoredForm(t *testing.T) {
	mount := func(fields map[string]any) []any { return []any{map[string]any{"name": "home"}, fields} }
	cases := []struct {
		name               string
		want, stored, have any
		ok                 bool
	}{
		{"dropped when stored, absent live", map[string]any{"readOnly": false}, map[string]any{}, map[string]any{}, true},
		{"dropped when stored, set live by hand", map[string]any{"readOnly": false}, map[string]any{}, map[string]any{"readOnly": true}, false},
		{"kept when stored, absent live", map[string]any{"automount": false}, map[string]any{"automount": false}, map[string]any{}, false},
		{"in a list element", mount(map[string]any{"readOnly": false}), mount(map[string]any{}), mount(map[string]any{}), true},
		{"a whole map the type does not know", map[string]any{"future": map[string]any{"on": true}}, map[string]any{}, map[string]any{}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := subset(tc.want, tc.stored, tc.have); got != tc.ok {
				t.Errorf("subset(%v, %v, %v) = %v, want %v", tc.want, tc.stored, tc.have, got, tc.ok)
			}
		})
	}
}

func owner() *unstructured.Unstructured {
	o := &unstructured.Unstructured{}
	o.SetAPIVersion("infra.cloudspace.dev/v1alpha1")
	o.SetKind("GenericDaemon")
	o.SetName("syslog")
	o.SetNamespace("ns")
	o.SetUID(types.UID("uid-1"))
	return o
}

func decorated(t *testing.T, image string) *unstructured.Unstructured {
	t.Helper()
	d := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "DaemonSet",
		"metadata": map[string]any{"name": "syslog", "namespace": "ns"},
		"spec":     map[string]any{"template": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "d", "image": image}}}}},
	}}
	if err := decorate(d, owner(), "genericdaemon", "0.1.0", false); err != nil {
		t.Fatal(err)
	}
	return d
}

func TestUpToDate(t *testing.T) {
	desired := decorated(t, "a:1")
	live := func(mutate func(*unstructured.Unstructured)) *unstructured.Unstructured {
		l := desired.DeepCopy()
		l.Object["status"] = map[string]any{"numberReady": int64(2)}
		unstructured.SetNestedField(l.Object, "2025-01-01T00:00:00Z", "metadata", "creationTimestamp")
		if mutate != nil {
			mutate(l)
		}
		return l
	}
	cases := []struct {
		name string
		live *unstructured.Unstructured
		ok   bool
	}{
		{"missing", nil, false},
		{"as applied, with server fields", live(nil), true},
		{"spec edited by hand", live(func(l *unstructured.Unstructured) {
			unstructured.SetNestedSlice(l.Object, []any{map[string]any{"name": "d", "image": "tampered"}}, "spec", "template", "spec", "containers")
		}), false},
		{"our label removed", live(func(l *unstructured.Unstructured) {
			labels := l.GetLabels()
			delete(labels, LabelInstance)
			l.SetLabels(labels)
		}), false},
		{"extra label added by someone", live(func(l *unstructured.Unstructured) {
			labels := l.GetLabels()
			labels["team"] = "x"
			l.SetLabels(labels)
		}), true},
		{"rendered differently before (hash)", decorated(t, "a:0"), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := upToDate(desired, nil, tc.live); got != tc.ok {
				t.Errorf("upToDate = %v, want %v", got, tc.ok)
			}
		})
	}
}

func TestDecorateKeepsChartLabelsAndHashesStably(t *testing.T) {
	a, b := decorated(t, "a:1"), decorated(t, "a:1")
	if a.GetAnnotations()[AnnotationSpecHash] != b.GetAnnotations()[AnnotationSpecHash] {
		t.Error("the same render hashed differently")
	}
	if decorated(t, "a:2").GetAnnotations()[AnnotationSpecHash] == a.GetAnnotations()[AnnotationSpecHash] {
		t.Error("a different render hashed the same")
	}
	c := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "x", "labels": map[string]any{LabelName: "mine"}}}}
	if err := decorate(c, owner(), "chart", "1.0.0", false); err != nil {
		t.Fatal(err)
	}
	if c.GetLabels()[LabelName] != "mine" || c.GetLabels()[LabelManagedBy] != ManagedByValue {
		t.Errorf("labels = %v: the chart's own name label must win, ours must be added", c.GetLabels())
	}
	if claimOf(c, owner()) != claimOwned || !*c.GetOwnerReferences()[0].BlockOwnerDeletion {
		t.Errorf("owner references = %+v, want a blocking controller reference to the owner", c.GetOwnerReferences())
	}
}

// TestRetainedChildHasNoOwnerReference: a child the kind keeps after delete carries no owner
// reference at all (so neither a foreground cascade nor an orphaned owner lets the garbage
// collector delete it), and the annotation that makes it the resource's.
func TestRetainedChildHasNoOwnerReference(t *testing.T) {
	c := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "PersistentVolumeClaim",
		"metadata": map[string]any{"name": "home", "namespace": "ns"}}}
	if err := decorate(c, owner(), "chart", "1.0.0", true); err != nil {
		t.Fatal(err)
	}
	if refs := c.GetOwnerReferences(); len(refs) != 0 {
		t.Errorf("owner references = %+v, want none", refs)
	}
	if got := c.GetAnnotations()[AnnotationRetainedFor]; got != "genericdaemon.infra.cloudspace.dev/syslog/uid-1" {
		t.Errorf("%s = %q", AnnotationRetainedFor, got)
	}
	if claimOf(c, owner()) != claimOwned {
		t.Error("a retained child is not its resource's own")
	}
}

// TestClaimOf is the engine's one rule of ownership, case by case.
func TestClaimOf(t *testing.T) {
	yes := true
	obj := func(refs []metav1.OwnerReference, retainedFor string) *metav1.ObjectMeta {
		m := &metav1.ObjectMeta{Name: "x", OwnerReferences: refs}
		if retainedFor != "" {
			m.Annotations = map[string]string{AnnotationRetainedFor: retainedFor}
		}
		return m
	}
	cases := []struct {
		name string
		obj  *metav1.ObjectMeta
		want claim
	}{
		{"our controller reference", obj([]metav1.OwnerReference{{UID: "uid-1", Controller: &yes}}, ""), claimOwned},
		{"another controller", obj([]metav1.OwnerReference{{UID: "uid-2", Controller: &yes, Kind: "Deployment", Name: "web"}}, ""), claimForeign},
		{"us, but not as controller", obj([]metav1.OwnerReference{{UID: "uid-1"}}, ""), claimForeign},
		{"nobody's", obj(nil, ""), claimForeign},
		{"retained for us", obj(nil, "genericdaemon.infra.cloudspace.dev/syslog/uid-1"), claimOwned},
		{"retained for an earlier syslog", obj(nil, "genericdaemon.infra.cloudspace.dev/syslog/uid-0"), claimRetained},
		{"retained for another name", obj(nil, "genericdaemon.infra.cloudspace.dev/other/uid-0"), claimForeign},
		{"retained for another kind", obj(nil, "workspace.infra.cloudspace.dev/syslog/uid-0"), claimForeign},
		{"retained, but someone's controller", obj([]metav1.OwnerReference{{UID: "uid-2", Controller: &yes}}, "genericdaemon.infra.cloudspace.dev/syslog/uid-1"), claimForeign},
		{"malformed annotation", obj(nil, "syslog"), claimForeign},
	}
	for _, tc := range cases {
		if got := claimOf(tc.obj, owner()); got != tc.want {
			t.Errorf("%s: claim = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestInventoryEntryRoundTrip(t *testing.T) {
	d := decorated(t, "a:1")
	e := inventoryEntry(d)
	if e.ID != "ns_syslog_apps_DaemonSet" || e.Version != "v1" {
		t.Fatalf("entry = %+v", e)
	}
	back, err := objectFromEntry(e)
	if err != nil || back.GroupVersionKind() != d.GroupVersionKind() || back.GetName() != "syslog" || back.GetNamespace() != "ns" {
		t.Fatalf("round trip = %v, %v", back, err)
	}
	core, err := objectFromEntry(infrav1alpha1.InventoryEntry{ID: "ns_cm__ConfigMap", Version: "v1"})
	if err != nil || core.GetAPIVersion() != "v1" {
		t.Errorf("core group entry = %v, %v", core, err)
	}
	for _, bad := range []infrav1alpha1.InventoryEntry{{ID: "a_b_c", Version: "v1"}, {ID: "ns__apps_DaemonSet", Version: "v1"}, {ID: "ns_n_apps_DaemonSet"}} {
		if _, err := objectFromEntry(bad); err == nil {
			t.Errorf("malformed entry %+v accepted", bad)
		}
	}
}
