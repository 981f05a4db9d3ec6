package grpcapi

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/engine"
	"github.com/cloudspace-dev/cloudspace-operator/internal/workspace"
)

func testScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := infrav1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// interruptedCreates is the API's state for one create call whose caller gives up while the
// create is under way: the cache lags and has no workspace; raced, if set, is created on the
// server just before the call's create (after all its checks); and the create, real or
// refused, returns only after the call's context ended.
func interruptedCreates(t *testing.T, cancel context.CancelFunc, raced client.Object) (*workspaces, client.Client) {
	t.Helper()
	server := fake.NewClientBuilder().WithScheme(testScheme(t)).
		WithIndex(&infrav1alpha1.Workspace{}, ownerField, ownerIndex).Build()
	cache := interceptor.NewClient(server, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if isWorkspace(obj) {
				return apierrors.NewNotFound(infrav1alpha1.GroupVersion.WithResource("workspaces").GroupResource(), key.Name)
			}
			return c.Get(ctx, key, obj, opts...)
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if len((&client.CreateOptions{}).ApplyOptions(opts).DryRun) > 0 {
				return c.Create(ctx, obj, opts...)
			}
			if raced != nil {
				if err := c.Create(ctx, raced); err != nil {
					t.Fatal(err)
				}
			}
			obj.SetUID(types.UID(obj.GetName() + "-uid")) // as the API server would
			err := c.Create(ctx, obj, opts...)
			cancel()
			if err != nil {
				return err
			}
			return context.Canceled
		},
	})
	cfg := testSettings(t, inIDEs)
	return newWorkspaces(cache, cache, server, newNotifier(), cfg, newQuotaLock(server, server, "ops")), server
}

// TestInterruptedCreateLeavesAnotherUsersWorkspace: bob takes a name while alice's create of
// it is under way (after its checks, before its create), and her call ends after her
// deadline; bob's workspace stays.
func TestInterruptedCreateLeavesAnotherUsersWorkspace(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	bobs := &infrav1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Namespace: "ides", Name: "proj", UID: "bobs-uid"}, Spec: infrav1alpha1.WorkspaceSpec{Owner: "bob"}}
	w, server := interruptedCreates(t, cancel, bobs)
	bobs = bobs.DeepCopy()
	if _, err := w.create(ctx, "alice", spec{name: "proj", namespace: "ides"}, true); err == nil {
		t.Fatal("alice's create of bob's name succeeded")
	}
	var after infrav1alpha1.Workspace
	if err := server.Get(context.Background(), client.ObjectKeyFromObject(bobs), &after); err != nil || after.Spec.Owner != "bob" {
		t.Errorf("bob's workspace after alice's failed create: %+v, %v", after.Spec, err)
	}
}

// TestInterruptedCreateRemovesWhatItCreated: a create that happened although the call ended
// is removed again, so nobody is left with a workspace they did not get.
func TestInterruptedCreateRemovesWhatItCreated(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, server := interruptedCreates(t, cancel, nil)
	if _, err := w.create(ctx, "alice", spec{name: "mine", namespace: "ides"}, true); err == nil {
		t.Fatal("an interrupted create reported success")
	}
	if err := deleted(server, client.ObjectKey{Namespace: "ides", Name: "mine"}); err != nil {
		t.Errorf("the workspace the interrupted call created: %v", err)
	}
}

// deleted reports whether a workspace is gone or being deleted: it carries the operator's
// finalizer from its create, and the operator tears it down.
func deleted(c client.Reader, key client.ObjectKey) error {
	var ws infrav1alpha1.Workspace
	err := c.Get(context.Background(), key, &ws)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	case ws.DeletionTimestamp == nil:
		return fmt.Errorf("%s is still there, not being deleted", key)
	}
	return nil
}

// TestCreateStoredAfterTheCallGaveUpIsRemoved: the caller's deadline ends while its create is
// in flight, and the API server stores the workspace only after that, as it may. The workspace
// is removed all the same, not left to start with no one waiting for it.
func TestCreateStoredAfterTheCallGaveUpIsRemoved(t *testing.T) {
	server := fake.NewClientBuilder().WithScheme(testScheme(t)).
		WithIndex(&infrav1alpha1.Workspace{}, ownerField, ownerIndex).Build()
	stored := make(chan struct{})
	slowServer := interceptor.NewClient(server, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if len((&client.CreateOptions{}).ApplyOptions(opts).DryRun) > 0 {
				return c.Create(ctx, obj, opts...)
			}
			// The server takes 300 ms whatever the client does; the client waits for its answer
			// only as long as its context lets it.
			done := make(chan error, 1)
			time.AfterFunc(300*time.Millisecond, func() {
				late := obj.DeepCopyObject().(client.Object)
				late.SetUID("late-uid")
				err := c.Create(context.Background(), late)
				if err == nil {
					obj.SetUID(late.GetUID())
					obj.SetResourceVersion(late.GetResourceVersion())
				}
				done <- err
			})
			select {
			case err := <-done:
				close(stored)
				return err
			case <-ctx.Done():
				go func() { <-done; close(stored) }()
				return ctx.Err()
			}
		},
	})
	cfg := testSettings(t, inIDEs)
	w := newWorkspaces(slowServer, slowServer, server, newNotifier(), cfg, newQuotaLock(server, server, "ops"))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := w.create(ctx, "alice", spec{name: "late", namespace: "ides"}, true); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("create = %v, want DeadlineExceeded", err)
	}
	<-stored
	if err := deleted(server, client.ObjectKey{Namespace: "ides", Name: "late"}); err != nil {
		t.Errorf("the workspace stored after the call gave up: %v", err)
	}
}

// TestAWorkspaceThatDoesNotDecodeIsItsOwnersBusiness: a Workspace stored with a value its Go
// type cannot hold answers its owner with what is wrong (FailedPrecondition, naming the field)
// and anyone else as a missing workspace (NotFound, nothing of its spec).
func TestAWorkspaceThatDoesNotDecodeIsItsOwnersBusiness(t *testing.T) {
	server := fake.NewClientBuilder().WithScheme(testScheme(t)).Build()
	cache := interceptor.NewClient(server, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if !isWorkspace(obj) {
				return c.Get(ctx, key, obj, opts...)
			}
			u := obj.(*unstructured.Unstructured)
			u.Object["spec"] = map[string]any{"owner": "alice", "startTimeout": "soon"}
			u.SetNamespace(key.Namespace)
			u.SetName(key.Name)
			return nil
		},
	})
	cfg := testSettings(t, inIDEs)
	w := newWorkspaces(cache, cache, server, newNotifier(), cfg, nil)
	_, err := w.owned(context.Background(), "alice", "ides", "old", refFields)
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "spec.startTimeout") {
		t.Errorf("the owner's read: %v, want FailedPrecondition naming spec.startTimeout", err)
	}
	_, err = w.owned(context.Background(), "bob", "ides", "old", refFields)
	if status.Code(err) != codes.NotFound || strings.Contains(err.Error(), "soon") {
		t.Errorf("another user's read: %v, want NotFound without the stored value", err)
	}
}

// isWorkspace reports whether obj is a Workspace as the API reads them: unstructured
// (decodingReader).
func isWorkspace(obj client.Object) bool {
	_, ok := obj.(*unstructured.Unstructured)
	return ok && obj.GetObjectKind().GroupVersionKind() == workspaceGVK
}

// doctorUnstructured runs doctor on the Workspace that u holds.
func doctorUnstructured(u *unstructured.Unstructured, doctor func(*infrav1alpha1.Workspace)) error {
	var ws infrav1alpha1.Workspace
	if err := decodeInto(u, &ws); err != nil {
		return err
	}
	doctor(&ws)
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&ws)
	if err != nil {
		return err
	}
	u.Object = m
	u.SetGroupVersionKind(workspaceGVK)
	return nil
}

// cachedAs is the API over server with a cache whose copy of every workspace is what doctor
// makes of the server's (an older version, or an earlier workspace of the name). refused
// counts the patches of a workspace that the server refused as stale.
func cachedAs(t *testing.T, server client.WithWatch, doctor func(*infrav1alpha1.Workspace)) (w *workspaces, refused *atomic.Int32) {
	t.Helper()
	refused = &atomic.Int32{}
	cache := interceptor.NewClient(server, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if err := c.Get(ctx, key, obj, opts...); err != nil {
				return err
			}
			if u, ok := obj.(*unstructured.Unstructured); ok && isWorkspace(u) {
				return doctorUnstructured(u, doctor)
			}
			return nil
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			err := c.Patch(ctx, obj, patch, opts...)
			if apierrors.IsConflict(err) {
				refused.Add(1)
			}
			return err
		},
	})
	cfg := testSettings(t, inIDEs)
	return newWorkspaces(cache, cache, server, newNotifier(), cfg, newQuotaLock(server, server, "ops")), refused
}

// TestStaleReadNeverStartsOrStopsAnotherUsersWorkspace: alice's workspace "proj" was deleted
// and bob made his own "proj"; a cache that still shows alice's lets her calls pass the owner
// check, but their writes are conditional on the version checked, so bob's is untouched.
// (Delete carries the checked UID as its precondition, which only a real API server enforces.)
func TestStaleReadNeverStartsOrStopsAnotherUsersWorkspace(t *testing.T) {
	for _, bobRunning := range []bool{true, false} {
		bobs := &infrav1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Namespace: "ides", Name: "proj", UID: "bobs-uid"},
			Spec: infrav1alpha1.WorkspaceSpec{Owner: "bob", Running: ptr.To(bobRunning)}}
		server := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(bobs).
			WithIndex(&infrav1alpha1.Workspace{}, ownerField, ownerIndex).Build()
		w, refused := cachedAs(t, server, func(ws *infrav1alpha1.Workspace) {
			ws.UID, ws.ResourceVersion, ws.Spec.Owner = "alices-uid", "1", "alice"
		})
		ctx := context.Background()
		if _, err := w.setRunning(ctx, "alice", "ides", "proj", !bobRunning, refFields); err == nil {
			t.Errorf("alice set running=%v on a stale read of bob's workspace", !bobRunning)
		}
		if refused.Load() != 1 {
			t.Errorf("%d patches refused as stale, want 1: the stale read passes the owner check, its write's precondition stops it", refused.Load())
		}
		var after infrav1alpha1.Workspace
		if err := server.Get(ctx, client.ObjectKeyFromObject(bobs), &after); err != nil || *after.Spec.Running != bobRunning {
			t.Errorf("bob's workspace after alice's call: running %v, %v; want %v", *after.Spec.Running, err, bobRunning)
		}
	}
}

// allows reports whether the user's quota lets a new workspace ("ides/new") do what a asks.
func allows(w *workspaces, user string, a ask) error {
	if w.quota == nil {
		w.quota = newQuotaLock(w.c, w.fresh, "ops")
	}
	key := types.NamespacedName{Namespace: "ides", Name: "new"}
	return w.withQuota(context.Background(), user, key, a, func() error { return nil })
}

// TestQuotaCountsAStoppingWorkspaceAsRunning: a workspace asked to stop whose IDE pod still
// runs holds its place in the running quota until the pod is gone.
func TestQuotaCountsAStoppingWorkspaceAsRunning(t *testing.T) {
	ws := func(name string, running bool, phase infrav1alpha1.WorkspacePhase) client.Object {
		return &infrav1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Namespace: "ides", Name: name},
			Spec: infrav1alpha1.WorkspaceSpec{Owner: "gina", Running: ptr.To(running)}, Status: infrav1alpha1.WorkspaceStatus{Phase: phase}}
	}
	for _, tc := range []struct {
		phase infrav1alpha1.WorkspacePhase
		full  bool
	}{{infrav1alpha1.WorkspaceStopping, true}, {infrav1alpha1.WorkspaceRunning, true}, {infrav1alpha1.WorkspaceStopped, false}} {
		server := fake.NewClientBuilder().WithScheme(testScheme(t)).WithIndex(&infrav1alpha1.Workspace{}, ownerField, ownerIndex).
			WithObjects(ws("a", true, infrav1alpha1.WorkspaceRunning), ws("b", false, tc.phase)).Build()
		cfg := testSettings(t, inIDEs, func(c *Config) { c.Quota.MaxRunning = 2 })
		w := newWorkspaces(server, server, server, newNotifier(), cfg, nil)
		err := allows(w, "gina", ask{running: true})
		if full := status.Code(err) == codes.ResourceExhausted; full != tc.full {
			t.Errorf("one running and one stopped in phase %s: quota full = %v (%v), want %v", tc.phase, full, err, tc.full)
		}
	}
}

// TestRetainedVolumesCountAgainstAQuota: a user with a released volume and a workspace that
// will keep its own is at a limit of 2 for a third; creating without Retain is unaffected.
func TestRetainedVolumesCountAgainstAQuota(t *testing.T) {
	released := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ides", Name: "old-home",
		Labels:      map[string]string{engine.LabelName: workspace.ChartName, engine.LabelInstance: "old", workspace.OwnerLabel: "hana"},
		Annotations: map[string]string{engine.AnnotationRetainedFor: "workspace.infra.cloudspace.dev/old/uid-0"}}}
	keeping := &infrav1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Namespace: "ides", Name: "keep"},
		Spec: infrav1alpha1.WorkspaceSpec{Owner: "hana", Storage: infrav1alpha1.WorkspaceStorage{ReclaimPolicy: infrav1alpha1.ReclaimRetain}}}
	server := fake.NewClientBuilder().WithScheme(testScheme(t)).WithIndex(&infrav1alpha1.Workspace{}, ownerField, ownerIndex).
		WithObjects(released, keeping).Build()
	cfg := testSettings(t, inIDEs, func(c *Config) { c.Quota.MaxRetainedVolumes = 2 })
	w := newWorkspaces(server, server, server, newNotifier(), cfg, nil)
	err := allows(w, "hana", ask{workspace: true, running: true, retained: true})
	if status.Code(err) != codes.ResourceExhausted {
		t.Errorf("a third kept volume: %v, want ResourceExhausted", err)
	}
	if err := allows(w, "hana", ask{workspace: true, running: true}); err != nil {
		t.Errorf("a workspace that keeps nothing: %v, want allowed", err)
	}
	if err := allows(w, "ivan", ask{workspace: true, running: true, retained: true}); err != nil {
		t.Errorf("another user: %v, want allowed", err)
	}
}

// TestStorageBudgetCountsLiveAndKeptVolumes: hana holds a 10Gi workspace and a 5Gi volume kept
// from a deleted one. Under a 20Gi budget she may add 5Gi but not 6Gi, taking back her kept
// volume by its name counts it once, what she was allowed counts until the read shows it, a
// workspace being deleted without keeping its volume no longer counts, and another user's
// budget is their own. With no budget, only the counts apply.
func TestStorageBudgetCountsLiveAndKeptVolumes(t *testing.T) {
	gi := func(n int64) int64 { return n << 30 }
	released := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ides", Name: "old-home",
		Labels:      map[string]string{engine.LabelName: workspace.ChartName, engine.LabelInstance: "old", workspace.OwnerLabel: "hana"},
		Annotations: map[string]string{engine.AnnotationRetainedFor: "workspace.infra.cloudspace.dev/old/uid-0"}},
		Spec: corev1.PersistentVolumeClaimSpec{Resources: corev1.VolumeResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("5Gi")}}}}
	sized := func(name, size string) *infrav1alpha1.Workspace {
		return &infrav1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Namespace: "ides", Name: name},
			Spec: infrav1alpha1.WorkspaceSpec{Owner: "hana", Storage: infrav1alpha1.WorkspaceStorage{Size: ptr.To(resource.MustParse(size))}}}
	}
	going := sized("going", "50Gi")
	going.DeletionTimestamp, going.Finalizers = ptr.To(metav1.Now()), []string{infrav1alpha1.Finalizer}
	server := fake.NewClientBuilder().WithScheme(testScheme(t)).WithIndex(&infrav1alpha1.Workspace{}, ownerField, ownerIndex).
		WithObjects(released, sized("home", "10Gi"), going).Build()
	cfg := testSettings(t, inIDEs, func(c *Config) { c.Quota.MaxStorage, c.Quota.MaxWorkspaces, c.Quota.MaxRunning = "20Gi", 10, 10 })
	w := newWorkspaces(server, server, server, newNotifier(), cfg, newQuotaLock(server, server, "ops"))
	claim := func(user, name string, bytes int64) error {
		ws := &infrav1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Namespace: "ides", Name: name},
			Spec: infrav1alpha1.WorkspaceSpec{Owner: user, Storage: infrav1alpha1.WorkspaceStorage{Size: resource.NewQuantity(bytes, resource.BinarySI)}}}
		return w.withQuota(context.Background(), user, client.ObjectKeyFromObject(ws),
			ask{workspace: true, running: true, storage: bytes}, func() error { return server.Create(context.Background(), ws) })
	}
	usage, err := w.storageUsage(context.Background(), "hana")
	if err != nil || usage.GetUsedBytes() != gi(15) || usage.GetKeptBytes() != gi(5) || usage.GetBudgetBytes() != gi(20) {
		t.Errorf("hana's reported storage: %v, %v; want 15Gi used, 5Gi of it kept, a 20Gi budget", usage, err)
	}
	refusals := testutil.ToFloat64(quotaRefusals.WithLabelValues("storage"))
	err = claim("hana", "big", gi(6))
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(status.Convert(err).Message(), "storage budget of 20Gi") {
		t.Errorf("6Gi over 15Gi held: %v, want ResourceExhausted naming the 20Gi budget", err)
	}
	if err := claim("hana", "old", gi(5)); err != nil {
		t.Errorf("taking back her kept 5Gi volume: %v, want allowed", err)
	}
	if err := claim("hana", "fits", gi(5)); err != nil {
		t.Errorf("5Gi more, to exactly 20Gi: %v, want allowed", err)
	}
	if err := claim("hana", "one-more", 1); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("a byte past what she was just allowed: %v, want ResourceExhausted", err)
	}
	if err := claim("ivan", "big", gi(20)); err != nil {
		t.Errorf("another user's 20Gi: %v, want allowed", err)
	}
	if got := testutil.ToFloat64(quotaRefusals.WithLabelValues("storage")); got != refusals+2 {
		t.Errorf("%v storage refusals counted, want %v", got-refusals, 2)
	}
	if usage, err = w.storageUsage(context.Background(), "hana"); err != nil || usage.GetUsedBytes() != gi(20) || usage.GetKeptBytes() != 0 {
		t.Errorf("hana's reported storage once she took her volume back: %v, %v; want 20Gi used, none kept", usage, err)
	}
	// The admin lowers the budget under what she holds: what adds nothing is still allowed.
	cfg.maxStorage = gi(10)
	if err := w.withQuota(context.Background(), "hana", types.NamespacedName{Namespace: "ides", Name: "old"},
		ask{storage: gi(5)}, func() error { return nil }); err != nil {
		t.Errorf("her own 5Gi volume again, over a lowered budget: %v, want allowed", err)
	}
	cfg.maxStorage = 0
	if err := claim("hana", "huge", gi(500)); err != nil {
		t.Errorf("with no budget: %v, want allowed", err)
	}
}

// TestStopWhileTheCacheLagsSucceeds: the operator has just written the workspace's status, so
// the cached copy is a version behind; the user's own stop is read again and goes through.
func TestStopWhileTheCacheLagsSucceeds(t *testing.T) {
	mine := &infrav1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Namespace: "ides", Name: "mine", UID: "mine-uid"},
		Spec: infrav1alpha1.WorkspaceSpec{Owner: "lou", Running: ptr.To(true)}}
	server := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(mine).
		WithIndex(&infrav1alpha1.Workspace{}, ownerField, ownerIndex).Build()
	// The cache shows the version before the operator's status write.
	w, refused := cachedAs(t, server, func(ws *infrav1alpha1.Workspace) { ws.ResourceVersion = "1" })
	if _, err := w.setRunning(context.Background(), "lou", "ides", "mine", false, refFields); err != nil {
		t.Fatalf("stop with a lagging cache: %v", err)
	}
	if refused.Load() != 1 {
		t.Errorf("%d patches refused as stale, want 1 (the one from the lagging cache's copy)", refused.Load())
	}
	var after infrav1alpha1.Workspace
	if err := server.Get(context.Background(), client.ObjectKeyFromObject(mine), &after); err != nil || *after.Spec.Running {
		t.Errorf("after the stop: running %v, %v; want stopped", *after.Spec.Running, err)
	}
}

// crdDefaults fills in what the CRD defaults when a create leaves it out, as the API server
// does on every create, dry run or not; memory is the CRD's default memory.
func crdDefaults(ws *infrav1alpha1.Workspace, memory string) {
	for _, d := range []struct {
		q     **resource.Quantity
		value string
	}{{&ws.Spec.Resources.CPU, "1"}, {&ws.Spec.Resources.Memory, memory}, {&ws.Spec.Storage.Size, "10Gi"}} {
		if *d.q == nil {
			*d.q = ptr.To(resource.MustParse(d.value))
		}
	}
}

// TestCreateChecksLimitsOnTheDefaultedWorkspace: the operator allows less memory than the CRD
// defaults (its own 2Gi, or 4Gi in a CRD installed from another version); a create that names
// no memory would get the default, which the lifecycle refuses to render. The API refuses it
// up front, naming the field, and creates nothing; a create within the limit goes through.
func TestCreateChecksLimitsOnTheDefaultedWorkspace(t *testing.T) {
	for _, tc := range []struct{ crdDefault, limit string }{{"2Gi", "1Gi"}, {"4Gi", "3Gi"}} {
		server := fake.NewClientBuilder().WithScheme(testScheme(t)).WithIndex(&infrav1alpha1.Workspace{}, ownerField, ownerIndex).
			WithInterceptorFuncs(interceptor.Funcs{
				Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
					if ws, ok := obj.(*infrav1alpha1.Workspace); ok {
						crdDefaults(ws, tc.crdDefault)
					}
					return c.Create(ctx, obj, opts...)
				},
			}).Build()
		cfg := testSettings(t, inIDEs)
		cfg.Limits = workspace.Limits{Memory: resource.MustParse(tc.limit)}
		w := newWorkspaces(server, server, server, newNotifier(), cfg, newQuotaLock(server, server, "ops"))
		_, err := w.create(context.Background(), "nina", spec{name: "small", namespace: "ides", fields: v1Fields}, false)
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "workspace.memory:") {
			t.Errorf("default %s, limit %s: %v, want InvalidArgument naming workspace.memory", tc.crdDefault, tc.limit, err)
		}
		if err := server.Get(context.Background(), client.ObjectKey{Namespace: "ides", Name: "small"}, &infrav1alpha1.Workspace{}); !apierrors.IsNotFound(err) {
			t.Errorf("default %s, limit %s: the refused create left a workspace: %v", tc.crdDefault, tc.limit, err)
		}
		if _, err := w.create(context.Background(), "nina", spec{name: "small", namespace: "ides", memory: tc.limit, fields: v1Fields}, false); err != nil {
			t.Errorf("default %s, limit %s: a create within the limit: %v", tc.crdDefault, tc.limit, err)
		}
	}
}

// TestQuotaCountsAStopWithNoPhaseAsRunning: a workspace asked to stop whose phase the operator
// could not write (its render failed after its IDE was started) may still run its IDE: it
// keeps its place in the running quota. One the operator never rendered runs nothing.
func TestQuotaCountsAStopWithNoPhaseAsRunning(t *testing.T) {
	rendered := &infrav1alpha1.Inventory{Entries: []infrav1alpha1.InventoryEntry{{ID: "ides_b_apps_Deployment", Version: "v1"}}}
	for _, tc := range []struct {
		inventory *infrav1alpha1.Inventory
		full      bool
	}{{rendered, true}, {nil, false}} {
		running := &infrav1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Namespace: "ides", Name: "a"},
			Spec: infrav1alpha1.WorkspaceSpec{Owner: "gina", Running: ptr.To(true)}, Status: infrav1alpha1.WorkspaceStatus{Phase: infrav1alpha1.WorkspaceRunning}}
		noPhase := &infrav1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Namespace: "ides", Name: "b"},
			Spec: infrav1alpha1.WorkspaceSpec{Owner: "gina", Running: ptr.To(false)}, Status: infrav1alpha1.WorkspaceStatus{Inventory: tc.inventory}}
		server := fake.NewClientBuilder().WithScheme(testScheme(t)).WithIndex(&infrav1alpha1.Workspace{}, ownerField, ownerIndex).
			WithObjects(running, noPhase).Build()
		cfg := testSettings(t, inIDEs, func(c *Config) { c.Quota.MaxRunning = 2 })
		w := newWorkspaces(server, server, server, newNotifier(), cfg, nil)
		err := allows(w, "gina", ask{running: true})
		if full := status.Code(err) == codes.ResourceExhausted; full != tc.full {
			t.Errorf("one running and one asked to stop with no phase (children applied: %v): quota full = %v (%v), want %v",
				tc.inventory != nil, full, err, tc.full)
		}
	}
}

// TestStartOverALoweredLimitIsRefused: the admin lowered the memory limit below olga's stopped
// workspace. Her start is refused up front, naming the field, rather than answered OK for a
// workspace the operator will not render (and that would hold a running place meanwhile).
func TestStartOverALoweredLimitIsRefused(t *testing.T) {
	big := &infrav1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Namespace: "ides", Name: "big", UID: "big-uid"},
		Spec: infrav1alpha1.WorkspaceSpec{Owner: "olga", Running: ptr.To(false),
			Resources: infrav1alpha1.WorkspaceResources{Memory: ptr.To(resource.MustParse("4Gi"))}}}
	server := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(big).
		WithIndex(&infrav1alpha1.Workspace{}, ownerField, ownerIndex).Build()
	cfg := testSettings(t, inIDEs)
	cfg.Limits = workspace.Limits{Memory: resource.MustParse("2Gi")}
	w := newWorkspaces(server, server, server, newNotifier(), cfg, newQuotaLock(server, server, "ops"))
	_, err := w.setRunning(context.Background(), "olga", "ides", "big", true, refFields)
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(status.Convert(err).Message(), "spec.resources.memory") {
		t.Errorf("a start over the lowered limit: %v, want FailedPrecondition naming spec.resources.memory", err)
	}
	var after infrav1alpha1.Workspace
	if err := server.Get(context.Background(), client.ObjectKeyFromObject(big), &after); err != nil || *after.Spec.Running {
		t.Errorf("after the refused start: running %v, %v; want still stopped", *after.Spec.Running, err)
	}
}

// TestStartAgainAfterTheOperatorStoppedIt: a workspace the operator stopped after failed starts
// (its spec still asks to run) counts as stopped for the quota, and Start starts it again by
// changing its spec; a second Start changes nothing more.
func TestStartAgainAfterTheOperatorStoppedIt(t *testing.T) {
	stoppedByOperator := &infrav1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Namespace: "ides", Name: "crashy", UID: "crashy-uid", Generation: 4},
		Spec: infrav1alpha1.WorkspaceSpec{Owner: "pia", Running: ptr.To(true)},
		Status: infrav1alpha1.WorkspaceStatus{Phase: infrav1alpha1.WorkspaceStopped, ObservedGeneration: 4,
			StoppedReason: infrav1alpha1.ReasonStartFailed, Message: "stopped after 3 failed starts"}}
	other := &infrav1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Namespace: "ides", Name: "fine"},
		Spec: infrav1alpha1.WorkspaceSpec{Owner: "pia", Running: ptr.To(true)}, Status: infrav1alpha1.WorkspaceStatus{Phase: infrav1alpha1.WorkspaceRunning}}
	server := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(stoppedByOperator, other).
		WithIndex(&infrav1alpha1.Workspace{}, ownerField, ownerIndex).Build()
	cfg := testSettings(t, inIDEs, func(c *Config) { c.Quota.MaxRunning = 2 })
	w := newWorkspaces(server, server, server, newNotifier(), cfg, newQuotaLock(server, server, "ops"))
	if err := allows(w, "pia", ask{running: true}); err != nil {
		t.Errorf("one running, one stopped by the operator, quota 2: %v, want room for one more", err)
	}
	start := func() *infrav1alpha1.Workspace {
		t.Helper()
		if _, err := w.setRunning(context.Background(), "pia", "ides", "crashy", true, refFields); err != nil {
			t.Fatalf("start: %v", err)
		}
		var after infrav1alpha1.Workspace
		if err := server.Get(context.Background(), client.ObjectKeyFromObject(stoppedByOperator), &after); err != nil {
			t.Fatal(err)
		}
		return &after
	}
	after := start()
	if after.Spec.StartRequests != 1 || !after.Spec.WantsRunning() {
		t.Fatalf("after Start: startRequests %d, running %v; want 1, true", after.Spec.StartRequests, after.Spec.WantsRunning())
	}
	// The API server's part, which the fake client does not play: a new generation.
	after.Generation++
	if err := server.Update(context.Background(), after); err != nil {
		t.Fatal(err)
	}
	if again := start(); again.Spec.StartRequests != 1 {
		t.Errorf("a second Start of a workspace starting again: startRequests %d, want still 1", again.Spec.StartRequests)
	}
}

// TestTheDeadlineSaysWhatItWaitedOn: a create-and-wait that runs out of time answers with the
// workspace's phase and message (here: waiting for its volume's cordoned node), not only that
// it was not running.
func TestTheDeadlineSaysWhatItWaitedOn(t *testing.T) {
	waiting := &infrav1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Namespace: "ides", Name: "held"}, Spec: infrav1alpha1.WorkspaceSpec{Owner: "alice"},
		Status: infrav1alpha1.WorkspaceStatus{Phase: infrav1alpha1.WorkspacePending, Message: "waiting for node n2, which holds the IDE's volume held-home: it is cordoned"}}
	server := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(waiting).
		WithIndex(&infrav1alpha1.Workspace{}, ownerField, ownerIndex).Build()
	w := newWorkspaces(server, server, server, newNotifier(), testSettings(t, inIDEs), newQuotaLock(server, server, "ops"))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := w.waitRunning(ctx, client.ObjectKeyFromObject(waiting), "", nil, false)
	if status.Code(err) != codes.DeadlineExceeded || !strings.Contains(err.Error(), "it was Pending: "+waiting.Status.Message) {
		t.Errorf("waitRunning = %v, want DeadlineExceeded saying the workspace's phase and message", err)
	}
}

// TestCreatedWorkspacesCarryTheFinalizer: the API writes the operator's finalizer with the
// workspace, so the operator's first reconcile goes straight to the children.
func TestCreatedWorkspacesCarryTheFinalizer(t *testing.T) {
	server := fake.NewClientBuilder().WithScheme(testScheme(t)).WithIndex(&infrav1alpha1.Workspace{}, ownerField, ownerIndex).Build()
	w := newWorkspaces(server, server, server, newNotifier(), testSettings(t, inIDEs), newQuotaLock(server, server, "ops"))
	if _, err := w.create(context.Background(), "nina", spec{name: "first", namespace: "ides", fields: v1Fields}, false); err != nil {
		t.Fatal(err)
	}
	var stored infrav1alpha1.Workspace
	if err := server.Get(context.Background(), client.ObjectKey{Namespace: "ides", Name: "first"}, &stored); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(stored.Finalizers, infrav1alpha1.Finalizer) {
		t.Errorf("finalizers = %v, want %s from the create", stored.Finalizers, infrav1alpha1.Finalizer)
	}
}
