package engine

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chartutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/engine/objcache"
	"github.com/cloudspace-dev/cloudspace-operator/internal/render"
	"github.com/cloudspace-dev/cloudspace-operator/internal/watches"
)

// A pure unit test of Reconcile's branches against controller-runtime's fake client: the only
// place the fake client is allowed. The fake client serves server-side apply (v0.22 keeps
// managed fields for every kind), so children are written through the engine's real Apply path;
// interceptors inject the failures.

var unitDemoGVK = schema.GroupVersionKind{Group: "test.cloudspace.dev", Version: "v1", Kind: "Demo"}

const (
	unitNamespace = "team-a"
	unitDemoName  = "d1"
	unitDemoUID   = types.UID("5d1c7a2e-0000-4000-8000-00000000d001")
)

// clientCache is the cache.Cache a Store reads, served by the fake client: a Store reads through
// Get and List alone, so every other method is left to the nil embedded Cache (a call panics,
// which would say the engine started to need more). selector, when set, is the child cache's
// label selection: an object without our managed-by label is not in it, as in production, so
// that a foreign object is found by the engine's API server read (readLive), not the cache.
type clientCache struct {
	cache.Cache
	reader   client.Reader
	selector labels.Selector
}

func (c clientCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := c.reader.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	if c.selector != nil && !c.selector.Matches(labels.Set(obj.GetLabels())) {
		return apierrors.NewNotFound(schema.GroupResource{}, key.Name)
	}
	return nil
}

func (c clientCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if c.selector != nil {
		opts = append(opts, client.MatchingLabelsSelector{Selector: c.selector})
	}
	return c.reader.List(ctx, list, opts...)
}

// acceptWatches stands in for the controller: ensureWatches only registers sources, which a
// unit test never starts.
type acceptWatches struct{ controller.Controller }

func (acceptWatches) Watch(source.TypedSource[reconcile.Request]) error { return nil }

// unitHarness is one reconciler of the Demo chart over a fresh fake cluster.
type unitHarness struct {
	client client.WithWatch
	r      *reconciler
	events *record.FakeRecorder
	last   *unstructured.Unstructured // the Demo as last seen after a pass; nil before any
}

func newUnitHarness(t *testing.T, funcs interceptor.Funcs, objs ...client.Object) *unitHarness {
	t.Helper()
	chart, err := render.Load("../../test/testdata/charts/demo")
	if err != nil {
		t.Fatal(err)
	}
	mapper := unitMapper()
	c := fake.NewClientBuilder().WithScheme(unitScheme()).WithRESTMapper(mapper).
		WithStatusSubresource(unitDemo(nil)).WithObjects(objs...).WithInterceptorFuncs(funcs).Build()
	events := record.NewFakeRecorder(100)
	managed := labels.SelectorFromSet(labels.Set{LabelManagedBy: ManagedByValue})
	r := &reconciler{
		client: c, apiReader: c, mapper: mapper,
		resources: objcache.Store{Cache: clientCache{reader: c}},
		children:  objcache.Store{Cache: clientCache{reader: c, selector: managed}, Scheme: clientgoscheme.Scheme},
		recorder:  events, caps: unitCapabilities(), chart: chart, lifecycle: ChartOnly{},
		watch: watches.Watch{Group: unitDemoGVK.Group, Version: unitDemoGVK.Version, Kind: unitDemoGVK.Kind, MaxConcurrentReconciles: 1},
		gvk:   unitDemoGVK, selector: labels.Everything(), cfg: defaultConfig(), metrics: newEngineMetrics(),
		controller: acceptWatches{}, watched: map[schema.GroupVersionKind]bool{}, recovery: newRecovery(),
		owners: newOwners(clientgoscheme.Scheme), status: newStatusWriter(c, defaultConfig()),
	}
	return &unitHarness{client: c, r: r, events: events}
}

// unitScheme is a scheme of its own per test: the fake client adds the unstructured kinds it
// meets to its scheme, which must not be client-go's shared one.
func unitScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	s.AddKnownTypeWithName(unitDemoGVK, &unstructured.Unstructured{})
	s.AddKnownTypeWithName(unitDemoGVK.GroupVersion().WithKind("DemoList"), &unstructured.UnstructuredList{})
	return s
}

// unitMapper knows the chart's kinds as namespaced, which checkScope requires of children.
func unitMapper() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	for _, k := range []string{"ConfigMap", "Service", "PersistentVolumeClaim"} {
		m.Add(corev1.SchemeGroupVersion.WithKind(k), meta.RESTScopeNamespace)
	}
	m.Add(unitDemoGVK, meta.RESTScopeNamespace)
	return m
}

// unitCapabilities are fetched already and never expire (now stands still), so discovery, which
// the nil client would serve, is never asked.
func unitCapabilities() *capabilities {
	at := time.Now()
	caps := chartutil.DefaultCapabilities.Copy()
	return &capabilities{ttl: time.Hour, now: func() time.Time { return at }, caps: caps, key: capabilitiesKey(caps), fetched: at}
}

// unitDemo is the Demo under test, at generation 1, with spec as its values.
func unitDemo(spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	if spec != nil {
		u.Object["spec"] = spec
	}
	u.SetGroupVersionKind(unitDemoGVK)
	u.SetNamespace(unitNamespace)
	u.SetName(unitDemoName)
	u.SetUID(unitDemoUID)
	u.SetGeneration(1)
	return u
}

// reconcile runs one pass and remembers the Demo as it is after it.
func (h *unitHarness) reconcile(t *testing.T) (ctrl.Result, error) {
	t.Helper()
	res, err := h.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: unitNamespace, Name: unitDemoName}})
	if d := h.demo(t); d != nil {
		h.last = d
	}
	return res, err
}

// reconcileUntilGone repeats Reconcile until the Demo is gone, at most passes times. Every pass
// that leaves the Demo in place must succeed and ask to come back: the children's deletion
// events are the only other trigger, and a teardown must not hang on one being missed.
func (h *unitHarness) reconcileUntilGone(t *testing.T, passes int) (ctrl.Result, error) {
	t.Helper()
	for range passes - 1 {
		res, err := h.reconcile(t)
		if h.demo(t) == nil {
			return res, err
		}
		if err != nil || res.RequeueAfter <= 0 {
			t.Fatalf("a teardown pass left the Demo and returned %+v, %v: want a requeue and no error", res, err)
		}
	}
	return h.reconcile(t)
}

// demo is the Demo as the fake cluster holds it; nil once it is gone.
func (h *unitHarness) demo(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	return h.get(t, unitDemoGVK, unitDemoName)
}

// object is "Kind/name" (a core kind) as the fake cluster holds it; nil when it does not exist.
func (h *unitHarness) object(t *testing.T, ref string) *unstructured.Unstructured {
	t.Helper()
	kind, name, _ := strings.Cut(ref, "/")
	return h.get(t, corev1.SchemeGroupVersion.WithKind(kind), name)
}

// get reads an object of gvk in the test's namespace; nil when it does not exist.
func (h *unitHarness) get(t *testing.T, gvk schema.GroupVersionKind, name string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	err := h.client.Get(context.Background(), types.NamespacedName{Namespace: unitNamespace, Name: name}, u)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// drainEvents returns the events recorded so far, as "Type Reason message".
func (h *unitHarness) drainEvents() []string {
	var out []string
	for {
		select {
		case e := <-h.events.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// foreignConfigMap stands where the chart renders d1-config, made by someone else: no owner
// reference, none of our labels.
func foreignConfigMap() *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: unitNamespace, Name: unitDemoName + "-config", Labels: map[string]string{"team": "other"}},
		Data:       map[string]string{"theirs": "yes"},
	}
}

// conflictOnce makes the first apply of a child of kind fail with 409 Conflict, as the API
// server answers an apply whose resourceVersion precondition (createOnly, or the version read)
// no longer holds; the child is not written. Later applies reach the fake cluster. The fake
// client's server-side apply ignores the resourceVersion precondition (v0.22.4), so the
// conflict is injected here; the engine's handling of it is the real one (apply, write,
// applyFailed).
func conflictOnce(kind string) interceptor.Funcs {
	var done atomic.Bool
	return interceptor.Funcs{
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			u, ok := obj.(interface{ GetKind() string })
			if ok && u.GetKind() == kind && done.CompareAndSwap(false, true) {
				return apierrors.NewConflict(schema.GroupResource{Resource: strings.ToLower(kind) + "s"}, "", errors.New("the object has been modified"))
			}
			return c.Apply(ctx, obj, opts...)
		},
	}
}

type errKind int

const (
	errNone     errKind = iota
	errRetried          // an error controller-runtime retries with back-off
	errTerminal         // reconcile.TerminalError: not retried until the resource changes
)

// reconcileWant is what a case asserts after its passes.
type reconcileWant struct {
	err     errKind
	errText string        // a part of the error's message
	requeue time.Duration // the last pass's RequeueAfter
	// gone: the Demo is deleted. Otherwise finalizer says whether it carries ours.
	gone, finalizer bool
	// noStatus: the Demo has no status at all (none was ever written).
	noStatus bool
	// conditions of the Demo as last seen, type to "Status/Reason"; "" means absent.
	conditions         map[string]string
	observedGeneration int64
	// events are the prefixes ("Type Reason message…") of every event recorded, in order.
	events []string
	// owned exist controlled by the Demo; absent do not exist ("Kind/name").
	owned, absent []string
}

type reconcileCase struct {
	name     string
	spec     map[string]any
	existing []client.Object
	funcs    interceptor.Funcs
	// run is the passes under test; one Reconcile when nil.
	run func(t *testing.T, h *unitHarness) (ctrl.Result, error)
	// check asserts what only this case is about.
	check func(t *testing.T, h *unitHarness)
	want  reconcileWant
}

func TestReconcileBranches(t *testing.T) {
	config, service := "ConfigMap/"+unitDemoName+"-config", "Service/"+unitDemoName
	for _, tc := range []reconcileCase{{
		name: "success",
		want: reconcileWant{
			finalizer: true, observedGeneration: 1,
			conditions: map[string]string{
				infrav1alpha1.ConditionReady: "True/Reconciled", infrav1alpha1.ConditionDegraded: "False/Reconciled",
				infrav1alpha1.ConditionProgressing: "False/Reconciled", infrav1alpha1.ConditionStalled: "", infrav1alpha1.ConditionReconciling: "",
			},
			// A first install is recorded by the status alone: no ChildCreated event.
			events: nil,
			owned:  []string{config, service},
		},
		check: checkInventory(config, service),
	}, {
		name: "render failure",
		spec: map[string]any{"fail": "boom"},
		want: reconcileWant{
			err: errTerminal, errText: "boom", finalizer: true,
			// Stalled observes the generation: it was handled, and failed.
			observedGeneration: 1,
			conditions: map[string]string{
				infrav1alpha1.ConditionReady: "False/RenderFailed", infrav1alpha1.ConditionDegraded: "True/RenderFailed",
				infrav1alpha1.ConditionStalled: "True/RenderFailed", infrav1alpha1.ConditionReconciling: "",
			},
			events: []string{"Warning " + infrav1alpha1.EventReconcileFailed + " chart did not render"},
			absent: []string{config, service},
		},
	}, {
		name:     "ownership conflict",
		existing: []client.Object{foreignConfigMap()},
		want: reconcileWant{
			// Retried, not terminal: the conflict clears once the other object is gone.
			err: errRetried, errText: "ConfigMap d1-config already exists and is not controlled by any resource",
			finalizer: true, observedGeneration: 1,
			conditions: map[string]string{
				infrav1alpha1.ConditionReady: "False/OwnershipConflict", infrav1alpha1.ConditionDegraded: "True/OwnershipConflict",
				infrav1alpha1.ConditionStalled: "True/OwnershipConflict", infrav1alpha1.ConditionReconciling: "",
			},
			events: []string{"Warning " + infrav1alpha1.EventOwnershipConflict + " ConfigMap d1-config already exists"},
			// Every place is checked before anything is written: not even the Service.
			absent: []string{service},
		},
		check: checkForeignUnchanged,
	}, {
		name:  "write conflict",
		funcs: conflictOnce("ConfigMap"),
		want: reconcileWant{
			requeue: conflictRetry, finalizer: true,
			// The status is computed from reads the conflict proved out of date: none is written.
			noStatus: true,
			absent:   []string{config},
		},
		check: checkConflictRetrySucceeds(config, service),
	}, {
		name: "delete",
		run:  deleteAfterInstall,
		want: reconcileWant{
			gone: true,
			// The last status seen, while the teardown waited: Deleting, and Reconciling.
			observedGeneration: 1,
			conditions: map[string]string{
				infrav1alpha1.ConditionReady: "False/Deleting", infrav1alpha1.ConditionDegraded: "False/Deleting",
				infrav1alpha1.ConditionReconciling: "True/Deleting", infrav1alpha1.ConditionStalled: "",
			},
			// In reverse install order.
			events: []string{
				"Normal " + infrav1alpha1.EventChildDeleted + " Deleted Service d1",
				"Normal " + infrav1alpha1.EventChildDeleted + " Deleted ConfigMap d1-config",
			},
			absent: []string{config, service},
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			h := newUnitHarness(t, tc.funcs, append([]client.Object{unitDemo(tc.spec)}, tc.existing...)...)
			run := tc.run
			if run == nil {
				run = func(t *testing.T, h *unitHarness) (ctrl.Result, error) { return h.reconcile(t) }
			}
			res, err := run(t, h)
			checkResult(t, tc.want, res, err)
			checkDemo(t, h, tc.want)
			checkEvents(t, h.drainEvents(), tc.want.events)
			checkChildren(t, h, tc.want)
			if tc.check != nil {
				tc.check(t, h)
			}
		})
	}
}

// holdFinalizer is some other controller's finalizer on a child: it keeps the child, deleted,
// in place until released, so that the teardown has to wait for it.
const holdFinalizer = "test.cloudspace.dev/hold"

// deleteAfterInstall installs the Demo's children with a successful pass, deletes the Demo
// (the fake cluster sets its deletion timestamp: our finalizer holds it) and tears it down.
// The ConfigMap is held by another finalizer for the first teardown pass: while a child is
// still there, our finalizer must stay; once it is gone, the Demo goes.
func deleteAfterInstall(t *testing.T, h *unitHarness) (ctrl.Result, error) {
	if _, err := h.reconcile(t); err != nil {
		t.Fatalf("install: %v", err)
	}
	if h.object(t, "Service/d1") == nil {
		t.Fatal("the install pass created no children to tear down")
	}
	h.setHold(t, true)
	h.drainEvents() // the install's own; the case asserts the teardown's
	if err := h.client.Delete(context.Background(), h.demo(t)); err != nil {
		t.Fatal(err)
	}
	res, err := h.reconcile(t)
	if err != nil || res.RequeueAfter != h.r.cfg.deleteInterval {
		t.Fatalf("the teardown pass that waits returned %+v, %v; want a requeue after %s", res, err, h.r.cfg.deleteInterval)
	}
	if d := h.demo(t); d == nil || !hasFinalizer(d) {
		t.Fatal("our finalizer was removed while a child was still there")
	}
	if cm := h.object(t, "ConfigMap/d1-config"); cm == nil || cm.GetDeletionTimestamp() == nil {
		t.Fatal("the held ConfigMap was not deleted")
	}
	h.setHold(t, false) // the fake cluster removes the deleted ConfigMap now
	return h.reconcileUntilGone(t, 3)
}

// setHold adds holdFinalizer to the ConfigMap child, or removes it.
func (h *unitHarness) setHold(t *testing.T, hold bool) {
	t.Helper()
	cm := h.object(t, "ConfigMap/d1-config")
	if cm == nil {
		t.Fatal("no ConfigMap to hold")
	}
	base := cm.DeepCopy()
	if hold {
		cm.SetFinalizers(append(cm.GetFinalizers(), holdFinalizer))
	} else {
		cm.SetFinalizers(nil)
	}
	if err := h.client.Patch(context.Background(), cm, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
}

func checkResult(t *testing.T, want reconcileWant, res ctrl.Result, err error) {
	t.Helper()
	terminal := errors.Is(err, reconcile.TerminalError(nil))
	switch {
	case want.err == errNone && err != nil:
		t.Errorf("Reconcile: %v, want no error", err)
	case want.err == errRetried && (err == nil || terminal):
		t.Errorf("Reconcile: %v, want an error that is retried (not terminal)", err)
	case want.err == errTerminal && !terminal:
		t.Errorf("Reconcile: %v, want a terminal error", err)
	}
	if err != nil && !strings.Contains(err.Error(), want.errText) {
		t.Errorf("Reconcile error %q does not say %q", err, want.errText)
	}
	if res.RequeueAfter != want.requeue {
		t.Errorf("RequeueAfter = %s, want %s", res.RequeueAfter, want.requeue)
	}
}

// checkDemo checks the Demo: gone or not, its finalizer and its status as last seen.
func checkDemo(t *testing.T, h *unitHarness, want reconcileWant) {
	t.Helper()
	now := h.demo(t)
	if want.gone != (now == nil) {
		t.Fatalf("the Demo is gone: %t, want %t", now == nil, want.gone)
	}
	if now != nil && hasFinalizer(now) != want.finalizer {
		t.Errorf("the Demo carries our finalizer: %t, want %t (finalizers %v)", !want.finalizer, want.finalizer, now.GetFinalizers())
	}
	if h.last == nil {
		t.Fatal("no pass saw the Demo")
	}
	status, hasStatus, _ := unstructured.NestedMap(h.last.Object, "status")
	if want.noStatus {
		if hasStatus {
			t.Errorf("a status was written: %v", status)
		}
		return
	}
	st, err := readStatus(h.last)
	if err != nil {
		t.Fatal(err)
	}
	if st.ObservedGeneration != want.observedGeneration {
		t.Errorf("observedGeneration = %d, want %d", st.ObservedGeneration, want.observedGeneration)
	}
	for typ, w := range want.conditions {
		got := ""
		if c := meta.FindStatusCondition(st.Conditions, typ); c != nil {
			got = string(c.Status) + "/" + c.Reason
		}
		if got != w {
			t.Errorf("condition %s = %q, want %q (conditions %+v)", typ, got, w, st.Conditions)
		}
	}
}

func hasFinalizer(u *unstructured.Unstructured) bool {
	for _, f := range u.GetFinalizers() {
		if f == infrav1alpha1.Finalizer {
			return true
		}
	}
	return false
}

func checkEvents(t *testing.T, got, want []string) {
	t.Helper()
	ok := len(got) == len(want)
	for i := 0; ok && i < len(want); i++ {
		ok = strings.HasPrefix(got[i], want[i])
	}
	if !ok {
		t.Errorf("events = %q, want ones starting %q", got, want)
	}
}

func checkChildren(t *testing.T, h *unitHarness, want reconcileWant) {
	t.Helper()
	for _, ref := range want.absent {
		if h.object(t, ref) != nil {
			t.Errorf("%s exists, want none", ref)
		}
	}
	for _, ref := range want.owned {
		o := h.object(t, ref)
		if o == nil {
			t.Errorf("%s does not exist", ref)
			continue
		}
		c := metav1.GetControllerOf(o)
		if c == nil || c.UID != unitDemoUID || c.Kind != unitDemoGVK.Kind || c.Name != unitDemoName {
			t.Errorf("%s is controlled by %+v, want the Demo", ref, c)
		}
		if o.GetLabels()[LabelManagedBy] != ManagedByValue {
			t.Errorf("%s lacks our managed-by label: %v", ref, o.GetLabels())
		}
	}
}

// checkInventory: the status records every child, so that a delete finds them all.
func checkInventory(refs ...string) func(*testing.T, *unitHarness) {
	return func(t *testing.T, h *unitHarness) {
		st, err := readStatus(h.last)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		if st.Inventory != nil {
			for _, e := range st.Inventory.Entries {
				gvk, _, name, err := e.Object()
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, gvk.Kind+"/"+name)
			}
		}
		if strings.Join(got, " ") != strings.Join(refs, " ") {
			t.Errorf("inventory = %v, want %v", got, refs)
		}
	}
}

// checkForeignUnchanged: the object in the child's place is left exactly as it was.
func checkForeignUnchanged(t *testing.T, h *unitHarness) {
	cm := h.object(t, "ConfigMap/d1-config")
	if cm == nil {
		t.Fatal("the foreign ConfigMap was deleted")
	}
	want := foreignConfigMap()
	data, _, _ := unstructured.NestedStringMap(cm.Object, "data")
	// 999 is the version the fake client gives the objects it starts with: any write bumps it.
	if cm.GetResourceVersion() != "999" || len(cm.GetOwnerReferences()) != 0 ||
		!labels.Equals(cm.GetLabels(), want.Labels) || len(data) != 1 || data["theirs"] != "yes" {
		t.Errorf("the foreign ConfigMap was changed: %v", cm.Object)
	}
}

// checkConflictRetrySucceeds: the conflicted pass must not have been a dead end; the requeued
// pass, reading afresh, writes the children and the status.
func checkConflictRetrySucceeds(refs ...string) func(*testing.T, *unitHarness) {
	return func(t *testing.T, h *unitHarness) {
		if res, err := h.reconcile(t); err != nil || res.RequeueAfter != 0 {
			t.Fatalf("the retry returned %+v, %v; want done", res, err)
		}
		st, err := readStatus(h.last)
		if err != nil {
			t.Fatal(err)
		}
		if c := meta.FindStatusCondition(st.Conditions, infrav1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
			t.Errorf("after the retry Ready = %+v, want True", c)
		}
		checkChildren(t, h, reconcileWant{owned: refs})
	}
}

// TestChildrenWrittenBeforeAConflictArePruned: a reconcile that meets a write conflict writes no
// status, but the children it wrote before are in the cluster; when the spec then stops
// rendering one of them, the next reconcile must still know it and prune it.
func TestChildrenWrittenBeforeAConflictArePruned(t *testing.T) {
	extra := "ConfigMap/" + unitDemoName + "-extra"
	h := newUnitHarness(t, conflictOnce("Service"), unitDemo(map[string]any{"extra": true}))
	if res, err := h.reconcile(t); err != nil || res.RequeueAfter != conflictRetry {
		t.Fatalf("the conflicted pass returned %+v, %v: want a requeue after %s", res, err, conflictRetry)
	}
	if h.object(t, extra) == nil {
		t.Fatalf("%s was not written before the Service's conflicted write", extra)
	}
	d := h.demo(t)
	d.Object["spec"] = map[string]any{"extra": false}
	d.SetGeneration(2)
	if err := h.client.Update(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	if _, err := h.reconcile(t); err != nil {
		t.Fatal(err)
	}
	if h.object(t, extra) != nil {
		t.Errorf("%s, written before a write conflict and no longer rendered, was not pruned", extra)
	}
}

// TestDeleteReleasesWhatTheKindRetains: a Retainer's children are applied without an owner
// reference, and on delete released (our label off, the retained-for record on) instead of
// deleted; the rest go. A kind's StatusReporter fields are written with the engine's.
func TestDeleteReleasesWhatTheKindRetains(t *testing.T) {
	claim := "PersistentVolumeClaim/" + unitDemoName + "-claim"
	h := newUnitHarness(t, interceptor.Funcs{}, unitDemo(map[string]any{"claim": true}))
	h.r.lifecycle = keepClaims{}
	h.r.status.firstDelay = 0 // the claim is never bound: the status must not wait for it
	if _, err := h.reconcile(t); err != nil {
		t.Fatalf("install: %v", err)
	}
	if c := h.object(t, claim); c == nil || len(c.GetOwnerReferences()) != 0 {
		t.Fatalf("the retained claim is %v; want it applied without an owner reference", c)
	}
	if n, _, _ := unstructured.NestedInt64(h.last.Object, "status", "children"); n != 3 {
		t.Errorf("status.children = %d, want the kind's count of 3", n)
	}
	h.drainEvents()
	if err := h.client.Delete(context.Background(), h.demo(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := h.reconcileUntilGone(t, 3); err != nil {
		t.Fatal(err)
	}
	c := h.object(t, claim)
	if c == nil || c.GetLabels()[LabelManagedBy] != "" || c.GetAnnotations()[AnnotationRetainedFor] == "" {
		t.Fatalf("the claim after delete: %v; want it kept, released and marked", c)
	}
	checkChildren(t, h, reconcileWant{absent: []string{"ConfigMap/" + unitDemoName + "-config", "Service/" + unitDemoName}})
	if events := h.drainEvents(); len(events) == 0 || !strings.HasPrefix(events[0], "Normal "+infrav1alpha1.EventChildReleased+" Kept "+strings.Replace(claim, "/", " ", 1)) {
		t.Errorf("events = %q, want the claim's release first", events)
	}
}
