package grpcapi

import (
	"context"
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/engine"
	"github.com/cloudspace-dev/cloudspace-operator/internal/workspace"
)

// ask is what a call would add to a user's counts.
type ask struct {
	workspace bool // a new workspace
	running   bool // a workspace that is not running yet starts
	retained  bool // a workspace that keeps its volume after delete
}

// usage is what the quotas count of a user, by workspace: sets, so that a workspace counted
// both by a read and by a reservation counts once.
type usage struct {
	workspaces map[types.NamespacedName]bool // not being deleted
	running    map[types.NamespacedName]bool // not stopped (see stopped)
	kept       map[types.NamespacedName]bool // volumes kept or to be kept; nil until a call asks
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
	if err := w.readUsage(ctx, user, u, a.retained); err != nil {
		return nil, err
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	cur := u.current()
	switch {
	case a.workspace && !cur.workspaces[key] && len(cur.workspaces) >= w.cfg.maxWorkspaces:
		return nil, status.Errorf(codes.ResourceExhausted, "user %s has %d workspaces, the most allowed", user, len(cur.workspaces))
	case a.running && !cur.running[key] && len(cur.running) >= w.cfg.maxRunning:
		return nil, status.Errorf(codes.ResourceExhausted, "user %s has %d running workspaces, the most allowed", user, len(cur.running))
	case a.retained && !cur.kept[key] && len(cur.kept) >= w.cfg.maxRetained:
		return nil, status.Errorf(codes.ResourceExhausted, "user %s keeps %d volumes, the most allowed; delete one they no longer need", user, len(cur.kept))
	}
	r := &reservation{key: key, ask: a}
	u.pending = append(u.pending, r)
	return r, nil
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
	read, err := w.usageOf(ctx, user, needKept)
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
func (w *workspaces) usageOf(ctx context.Context, user string, kept bool) (*usage, error) {
	all, err := w.userWorkspaces(ctx, w.fresh, user, "")
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
		if out.kept, err = w.keptVolumes(ctx, user, all); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// keptVolumes are the volumes the user keeps or will keep: those already released, and those
// of their workspaces with reclaimPolicy Retain (deleted or not), once each by name.
func (w *workspaces) keptVolumes(ctx context.Context, user string, all []infrav1alpha1.Workspace) (map[types.NamespacedName]bool, error) {
	kept := map[types.NamespacedName]bool{}
	for _, ws := range all {
		if ws.Spec.Storage.ReclaimPolicy == infrav1alpha1.ReclaimRetain {
			kept[types.NamespacedName{Namespace: ws.Namespace, Name: ws.Name}] = true
		}
	}
	for _, ns := range w.cfg.namespaces {
		var pvcs corev1.PersistentVolumeClaimList
		err := w.fresh.List(ctx, &pvcs, client.InNamespace(ns), workspace.Volumes(user))
		if err != nil {
			return nil, toStatus(err, "counting retained volumes")
		}
		for _, pvc := range pvcs.Items {
			if pvc.Annotations[engine.AnnotationRetainedFor] != "" {
				kept[types.NamespacedName{Namespace: ns, Name: pvc.Labels[engine.LabelInstance]}] = true
			}
		}
	}
	return kept, nil
}

// current is the usage read plus the reservations since; the caller holds u.mu.
func (u *userLock) current() usage {
	cur := usage{workspaces: copySet(u.base.workspaces), running: copySet(u.base.running), kept: copySet(u.base.kept)}
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
