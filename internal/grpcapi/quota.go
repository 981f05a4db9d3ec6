package grpcapi

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/engine"
	"github.com/cloudspace-dev/cloudspace-operator/internal/workspace"
	"github.com/cloudspace-dev/cloudspace-operator/pkg/workspacev1"
)

// ask is what a call would add to a user's counts.
type ask struct {
	workspace bool  // a new workspace
	running   bool  // a workspace that is not running yet starts
	retained  bool  // a workspace that keeps its volume after delete
	storage   int64 // the bytes of a new workspace's volume
}

// usage is what the quotas count of a user, by workspace: sets, so that a workspace counted
// both by a read and by a reservation counts once.
type usage struct {
	workspaces map[types.NamespacedName]bool // not being deleted
	running    map[types.NamespacedName]bool // not stopped (see stopped)
	kept       map[types.NamespacedName]bool // volumes kept or to be kept; nil until a call asks
	// storage is the bytes of each volume the user holds, by workspace: their workspaces' and
	// those kept after delete. Read with kept.
	storage map[types.NamespacedName]int64
}

// storageWith is the bytes of the user's volumes with one of bytes at key (a volume kept by
// the same name counts once: the workspace takes it back).
func (u usage) storageWith(key types.NamespacedName, bytes int64) int64 {
	total := max(bytes, u.storage[key])
	for k, b := range u.storage {
		if k != key {
			total += b
		}
	}
	return total
}

// needsVolumes reports whether deciding a needs the user's volumes read.
func (w *workspaces) needsVolumes(a ask) bool {
	return a.retained || (a.storage > 0 && w.cfg.maxStorage > 0)
}

// reservation is a write a call was allowed. It counts until a read of the user's usage that
// began after the write finished shows it.
type reservation struct {
	key  types.NamespacedName
	ask  ask
	done bool
}

// withQuota runs write if the user's quota allows what it asks for the workspace at key. The
// decision is taken on the user's turn, across every replica (quotaLock), from the user's
// usage read once while the Lease is held plus what calls allowed since; write runs after the
// turn is given back, so a burst of creates writes concurrently.
func (w *workspaces) withQuota(ctx context.Context, user string, key types.NamespacedName, a ask, write func() error) error {
	u, err := w.quota.enter(ctx, user)
	if err != nil {
		return status.Errorf(codes.Unavailable, "%v", err)
	}
	defer w.quota.exit(user, u)
	r, err := w.reserve(ctx, user, u, key, a)
	u.yield()
	if err != nil {
		return err
	}
	err = write()
	u.settle(r, err == nil)
	return err
}

// reserve checks a against the user's usage and, when it fits, counts it in.
func (w *workspaces) reserve(ctx context.Context, user string, u *userLock, key types.NamespacedName, a ask) (*reservation, error) {
	if err := w.readUsage(ctx, user, u, w.needsVolumes(a)); err != nil {
		return nil, err
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, q := range w.quotas(user, u.current(), key, a) {
		if !q.asked {
			continue
		}
		if q.limit > 0 {
			quotaUse.WithLabelValues(q.name).Observe(float64(q.after) / float64(q.limit))
		}
		// An ask that adds nothing (a volume taken back by its name) is never refused, even
		// over a limit an admin lowered.
		if q.after > q.limit && q.after > q.before {
			quotaRefusals.WithLabelValues(q.name).Inc()
			return nil, status.Error(codes.ResourceExhausted, q.refusal)
		}
	}
	r := &reservation{key: key, ask: a}
	u.pending = append(u.pending, r)
	return r, nil
}

// quota is one of a user's quotas as a call would leave it.
type quota struct {
	name                 string // the quota metrics' label
	asked                bool   // the call adds to it
	before, after, limit int64
	refusal              string // the ResourceExhausted message when after is over limit
}

// quotas are the user's quotas as a would leave them; cur is their usage before it.
func (w *workspaces) quotas(user string, cur usage, key types.NamespacedName, a ask) []quota {
	with := func(set map[types.NamespacedName]bool) int64 {
		if set[key] {
			return int64(len(set))
		}
		return int64(len(set)) + 1
	}
	n := func(set map[types.NamespacedName]bool) int64 { return int64(len(set)) }
	return []quota{
		{quotaWorkspaces, a.workspace, n(cur.workspaces), with(cur.workspaces), int64(w.cfg.Quota.MaxWorkspaces),
			fmt.Sprintf("user %s has %d workspaces, the most allowed", user, len(cur.workspaces))},
		{quotaRunning, a.running, n(cur.running), with(cur.running), int64(w.cfg.Quota.MaxRunning),
			fmt.Sprintf("user %s has %d running workspaces, the most allowed", user, len(cur.running))},
		{quotaRetained, a.retained, n(cur.kept), with(cur.kept), int64(w.cfg.Quota.MaxRetainedVolumes),
			fmt.Sprintf("user %s keeps %d volumes, the most allowed; delete one they no longer need", user, len(cur.kept))},
		{quotaStorage, a.storage > 0 && w.cfg.maxStorage > 0, cur.storageWith(key, 0), cur.storageWith(key, a.storage), w.cfg.maxStorage,
			fmt.Sprintf("user %s holds %s of volumes; %s more is over their storage budget of %s: delete a workspace or a kept volume they no longer need",
				user, quantity(cur.storageWith(key, 0)), quantity(a.storage), quantity(w.cfg.maxStorage))},
	}
}

// The quotas, as the metrics name them.
const (
	quotaWorkspaces = "workspaces"
	quotaRunning    = "running"
	quotaRetained   = "retained"
	quotaStorage    = "storage"
)

// The quota metrics, by quota, never by user.
var (
	quotaUse = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "cloudspace_quota_use_ratio",
		Help:    "What the user would hold of a quota if the call were allowed, over the quota, at each decision that adds to it.",
		Buckets: []float64{0.25, 0.5, 0.75, 0.9, 1, 1.5, 2},
	}, []string{"quota"})
	quotaRefusals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cloudspace_quota_refusals_total",
		Help: "Calls refused (ResourceExhausted) for going over a user's quota, by quota.",
	}, []string{"quota"})
)

func init() {
	metrics.Registry.MustRegister(quotaUse, quotaRefusals)
	// Every series from zero, so that Prometheus sees the first refusal as an increase.
	for _, q := range []string{quotaWorkspaces, quotaRunning, quotaRetained, quotaStorage} {
		quotaRefusals.WithLabelValues(q)
	}
}

// readUsage reads the user's usage from the API server unless it was read while this Lease
// was held (and, when kept is needed, with the kept volumes). Reservations whose writes had
// finished before the read began are in it, and are dropped.
func (w *workspaces) readUsage(ctx context.Context, user string, u *userLock, needKept bool) error {
	u.mu.Lock()
	fresh := u.base != nil && (!needKept || u.base.kept != nil)
	var finished []*reservation
	for _, r := range u.pending {
		if r.done {
			finished = append(finished, r)
		}
	}
	u.mu.Unlock()
	if fresh {
		return nil
	}
	read, err := w.usageOf(ctx, user, needKept, w.decisionRead())
	if err != nil {
		return err
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.base = read
	u.pending = slices.DeleteFunc(u.pending, func(r *reservation) bool { return slices.Contains(finished, r) })
	return nil
}

// usageOf reads the user's workspaces (and, with kept, their kept volumes) from the API server.
func (w *workspaces) usageOf(ctx context.Context, user string, kept bool, from usageRead) (*usage, error) {
	all, err := w.userWorkspaces(ctx, from.workspaces, user, "")
	if err != nil {
		return nil, err
	}
	out := &usage{workspaces: map[types.NamespacedName]bool{}, running: map[types.NamespacedName]bool{}}
	for _, ws := range all {
		key := types.NamespacedName{Namespace: ws.Namespace, Name: ws.Name}
		// Workspaces being deleted are on their way out and no longer count as workspaces.
		if ws.DeletionTimestamp == nil {
			out.workspaces[key] = true
			if !stopped(&ws) {
				out.running[key] = true
			}
		}
	}
	if kept {
		if err := w.volumesOf(ctx, user, all, out, from.volumes...); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// volumesOf fills in the volumes the user holds: kept are those they keep or will keep (those
// already released, and those of their workspaces with reclaimPolicy Retain, deleted or not),
// storage the bytes of every one, their live workspaces' included; each once by name.
func (w *workspaces) volumesOf(ctx context.Context, user string, all []infrav1alpha1.Workspace, out *usage, opts ...client.ListOption) error {
	out.kept, out.storage = map[types.NamespacedName]bool{}, map[types.NamespacedName]int64{}
	for _, ws := range all {
		key := types.NamespacedName{Namespace: ws.Namespace, Name: ws.Name}
		retain := ws.Spec.Storage.ReclaimPolicy == infrav1alpha1.ReclaimRetain
		if retain {
			out.kept[key] = true
		}
		if (retain || ws.DeletionTimestamp == nil) && ws.Spec.Storage.Size != nil {
			out.storage[key] = ws.Spec.Storage.Size.Value()
		}
	}
	for _, ns := range w.cfg.servedNamespaces {
		var pvcs corev1.PersistentVolumeClaimList
		err := w.fresh.List(ctx, &pvcs, append([]client.ListOption{client.InNamespace(ns), workspace.Volumes(user)}, opts...)...)
		if err != nil {
			return toStatus(err, "counting retained volumes")
		}
		for _, pvc := range pvcs.Items {
			if pvc.Annotations[engine.AnnotationRetainedFor] != "" {
				key := types.NamespacedName{Namespace: ns, Name: pvc.Labels[engine.LabelInstance]}
				out.kept[key] = true
				out.storage[key] = max(out.storage[key], pvc.Spec.Resources.Requests.Storage().Value())
			}
		}
	}
	return nil
}

// storageUsage is what the user's volumes hold against their budget, read from the API server.
func (w *workspaces) storageUsage(ctx context.Context, user string) (*workspacev1.StorageUsage, error) {
	u, err := w.usageOf(ctx, user, true, w.reportRead())
	if err != nil {
		return nil, err
	}
	out := &workspacev1.StorageUsage{BudgetBytes: w.cfg.maxStorage}
	for key, b := range u.storage {
		out.UsedBytes += b
		if !u.workspaces[key] {
			out.KeptBytes += b
		}
	}
	return out, nil
}

// storageReport is storageUsage for List, which it must not fail: nil, and a log line, when
// the volumes cannot be read.
func (w *workspaces) storageReport(ctx context.Context, user string) *workspacev1.StorageUsage {
	u, err := w.storageUsage(ctx, user)
	if err != nil {
		log.FromContext(ctx).Info("the storage report of a List is left out", "error", err.Error())
		return nil
	}
	return u
}

// usageRead is where a user's usage is read from.
type usageRead struct {
	workspaces client.Reader
	volumes    []client.ListOption // more options of the list of their volumes
}

// decisionRead reads for a quota decision: everything from the API server, as it is now.
func (w *workspaces) decisionRead() usageRead { return usageRead{workspaces: w.fresh} }

// reportRead reads for a report (List): the workspaces from the cache, as every other read of
// the API, and the volumes from the API server's watch cache, so that a portal polling List
// costs the API server no read of etcd.
func (w *workspaces) reportRead() usageRead {
	return usageRead{workspaces: w.c, volumes: []client.ListOption{&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: "0"}}}}
}

// quantity is n bytes as a quantity: 10Gi.
func quantity(n int64) string { return resource.NewQuantity(n, resource.BinarySI).String() }

// current is the usage read plus the reservations since; the caller holds u.mu.
func (u *userLock) current() usage {
	cur := usage{workspaces: copySet(u.base.workspaces), running: copySet(u.base.running), kept: copySet(u.base.kept),
		storage: maps.Clone(u.base.storage)}
	for _, r := range u.pending {
		if r.ask.workspace {
			cur.workspaces[r.key] = true
		}
		if r.ask.running {
			cur.running[r.key] = true
		}
		if r.ask.retained {
			cur.kept[r.key] = true
		}
		if r.ask.storage > 0 && cur.storage != nil {
			cur.storage[r.key] = max(cur.storage[r.key], r.ask.storage)
		}
	}
	return cur
}

func copySet(m map[types.NamespacedName]bool) map[types.NamespacedName]bool {
	out := make(map[types.NamespacedName]bool, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// settle records how a reservation's write ended: a failed one no longer counts.
func (u *userLock) settle(r *reservation, ok bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if ok {
		r.done = true
		return
	}
	u.pending = slices.DeleteFunc(u.pending, func(p *reservation) bool { return p == r })
}

// forget drops the usage read, so that the next decision reads it again.
func (u *userLock) forget() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.base = nil
}

// stopped reports whether a workspace counts as stopped for the quota: asked to stop (or
// stopped by the operator after failed starts), and its IDE pod gone (phase Stopped), not merely on its way out. No phase is no news: the operator
// writes none while it cannot render the workspace (a limit lowered under it, say), and the IDE
// started before may still run. Only a workspace the operator never applied anything for (no
// inventory) is known to run nothing.
func stopped(ws *infrav1alpha1.Workspace) bool {
	asked := !ws.Runs()
	neverApplied := ws.Status.Phase == "" && ws.Status.Inventory == nil
	return asked && (ws.Status.Phase == infrav1alpha1.WorkspaceStopped || neverApplied)
}
