package grpcapi

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/access"
	"github.com/cloudspace-dev/cloudspace-operator/pkg/workspacev1"
)

var v1Fields = fields{
	name: "workspace.name", namespace: "workspace.namespace", image: "workspace.image", port: "workspace.port",
	cpu: "workspace.cpu", memory: "workspace.memory", storage: "workspace.storage", git: "workspace.git_url",
	idleTimeout: "workspace.idle_timeout",
}

var refFields = fields{name: "name", namespace: "namespace"}

// v1Service serves cloudspace.v1.WorkspaceService.
type v1Service struct {
	workspacev1.UnimplementedWorkspaceServiceServer
	w *workspaces
}

func (s *v1Service) Create(ctx context.Context, in *workspacev1.CreateWorkspaceRequest) (*workspacev1.Workspace, error) {
	r := in.GetWorkspace()
	sp := spec{name: r.GetName(), namespace: r.GetNamespace(), image: r.GetImage(), port: r.GetPort(),
		cpu: r.GetCpu(), memory: r.GetMemory(), storage: r.GetStorage(), git: r.GetGitUrl(), retain: r.GetRetainStorage()}
	if v := r.GetIdleTimeout(); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return nil, invalid(v1Fields.idleTimeout, "%q is not a duration (like 30m or 2h)", v)
		}
		sp.idleTimeout = d // its bounds are the CRD's, which the create's dry run applies
	}
	if err := s.w.validate(&sp, v1Fields); err != nil {
		return nil, err
	}
	ws, err := s.w.create(ctx, userFrom(ctx), sp, in.GetWait())
	if err != nil {
		return nil, err
	}
	return toV1(ws), nil
}

func (s *v1Service) Get(ctx context.Context, in *workspacev1.WorkspaceRef) (*workspacev1.Workspace, error) {
	ws, err := s.w.owned(ctx, userFrom(ctx), in.GetNamespace(), in.GetName(), refFields)
	if err != nil {
		return nil, err
	}
	return toV1(ws), nil
}

func (s *v1Service) List(ctx context.Context, in *workspacev1.ListWorkspacesRequest) (*workspacev1.ListWorkspacesResponse, error) {
	ns := in.GetNamespace()
	if ns != "" {
		var err error
		if ns, err = s.w.namespaceFor(ns, "namespace"); err != nil {
			return nil, err
		}
	}
	list, err := s.w.userWorkspaces(ctx, s.w.c, userFrom(ctx), ns)
	if err != nil {
		return nil, err
	}
	out := &workspacev1.ListWorkspacesResponse{Storage: s.w.storageReport(ctx, userFrom(ctx))}
	for i := range list {
		ws := toV1(&list[i])
		// Listing is no use of a workspace (Get is): what it says of use is what came before.
		if last := s.w.cfg.Activity.Of(list[i].UID).Last; !last.IsZero() {
			ws.LastUsed = last.UTC().Format(time.RFC3339)
		}
		out.Workspaces = append(out.Workspaces, ws)
	}
	return out, nil
}

func (s *v1Service) Start(ctx context.Context, in *workspacev1.StartWorkspaceRequest) (*workspacev1.Workspace, error) {
	ref := in.GetRef()
	ns, err := s.w.namespaceFor(ref.GetNamespace(), refFields.namespace)
	if err != nil {
		return nil, err
	}
	key := types.NamespacedName{Namespace: ns, Name: ref.GetName()}
	// Subscribe before starting, so that the Running event cannot be missed.
	poke, stop := s.w.notifier.subscribe(func(o *infrav1alpha1.Workspace) bool { return o.Namespace == key.Namespace && o.Name == key.Name })
	defer stop()
	ws, err := s.w.setRunning(ctx, userFrom(ctx), ns, key.Name, true, refFields)
	if err != nil || !in.GetWait() {
		return toV1OrNil(ws), err
	}
	// Starting an existing workspace never deletes it, whatever happens.
	ws, err = s.w.waitRunning(ctx, key, ws.UID, poke, false)
	return toV1OrNil(ws), err
}

func (s *v1Service) Stop(ctx context.Context, in *workspacev1.WorkspaceRef) (*workspacev1.Workspace, error) {
	ws, err := s.w.setRunning(ctx, userFrom(ctx), in.GetNamespace(), in.GetName(), false, refFields)
	return toV1OrNil(ws), err
}

func (s *v1Service) Delete(ctx context.Context, in *workspacev1.WorkspaceRef) (*workspacev1.DeleteWorkspaceResponse, error) {
	if err := s.w.delete(ctx, userFrom(ctx), in.GetNamespace(), in.GetName(), refFields); err != nil {
		return nil, err
	}
	return &workspacev1.DeleteWorkspaceResponse{}, nil
}

// GetAccess tells the owner how to log into the IDE. The password is derived, not read: the
// API needs no access to the Secrets of the users' namespaces.
func (s *v1Service) GetAccess(ctx context.Context, in *workspacev1.WorkspaceRef) (*workspacev1.WorkspaceAccess, error) {
	ws, err := s.w.owned(ctx, userFrom(ctx), in.GetNamespace(), in.GetName(), refFields)
	if err != nil {
		return nil, err
	}
	return s.access(ws), nil
}

// RotateAccess raises the workspace's access rotation, conditional on the version checked.
func (s *v1Service) RotateAccess(ctx context.Context, in *workspacev1.WorkspaceRef) (*workspacev1.WorkspaceAccess, error) {
	ws, err := s.w.change(ctx, userFrom(ctx), in.GetNamespace(), in.GetName(), refFields, nil, func(ws *infrav1alpha1.Workspace) (bool, error) {
		ws.Spec.Access.Rotation++
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	return s.access(ws), nil
}

func (s *v1Service) access(ws *infrav1alpha1.Workspace) *workspacev1.WorkspaceAccess {
	rot := ws.Spec.Access.Rotation
	if s.w.cfg.GatewayTrusted {
		return &workspacev1.WorkspaceAccess{Url: ws.Status.URL, Rotation: rot}
	}
	return &workspacev1.WorkspaceAccess{Url: ws.Status.URL, Rotation: rot, Password: access.Password(s.w.cfg.AccessKey, ws.UID, rot)}
}

// KeepAlive marks the workspace used (ownedFrom does, for every call on it), postponing its
// idle stop.
func (s *v1Service) KeepAlive(ctx context.Context, in *workspacev1.WorkspaceRef) (*workspacev1.Workspace, error) {
	return s.Get(ctx, in)
}

// Watch streams the user's workspaces: their state when the call starts, then every phase
// change, idle warning and deletion, until the caller ends the call.
func (s *v1Service) Watch(in *workspacev1.WatchWorkspacesRequest, stream workspacev1.WorkspaceService_WatchServer) error {
	ctx := stream.Context()
	user := userFrom(ctx)
	ns := in.GetNamespace()
	if ns != "" {
		var err error
		if ns, err = s.w.namespaceFor(ns, "namespace"); err != nil {
			return err
		}
	}
	if in.GetName() != "" {
		if err := validName(in.GetName(), "name"); err != nil {
			return err
		}
	}
	release, err := s.w.watchSlot(user)
	if err != nil {
		return err
	}
	defer release()
	poke, stop := s.w.notifier.subscribe(func(o *infrav1alpha1.Workspace) bool { return o.Spec.Owner == user })
	defer stop()
	sent := map[types.NamespacedName]watched{}
	for {
		if err := s.sendChanges(ctx, stream, user, ns, in.GetName(), sent); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-poke:
		}
	}
}

// sendChanges compares the user's workspaces with what the stream has been told and sends
// the differences.
func (s *v1Service) sendChanges(ctx context.Context, stream workspacev1.WorkspaceService_WatchServer, user, ns, name string, sent map[types.NamespacedName]watched) error {
	list, err := s.w.userWorkspaces(ctx, s.w.c, user, ns)
	if err != nil {
		return err
	}
	seen := map[types.NamespacedName]bool{}
	for i := range list {
		ws := &list[i]
		if name != "" && ws.Name != name {
			continue
		}
		key := types.NamespacedName{Namespace: ws.Namespace, Name: ws.Name}
		seen[key] = true
		prev, known := sent[key]
		now := watchedOf(ws)
		typ := workspacev1.WorkspaceEvent_PHASE_CHANGED
		switch {
		case !known:
			typ = workspacev1.WorkspaceEvent_ADDED
		case prev == now:
			continue
		case prev.phase == now.phase:
			typ = workspacev1.WorkspaceEvent_IDLE_WARNING
		}
		sent[key] = now
		if err := stream.Send(&workspacev1.WorkspaceEvent{Type: typ, Workspace: toV1(ws)}); err != nil {
			return err
		}
	}
	for key := range sent {
		if !seen[key] {
			delete(sent, key)
			ev := &workspacev1.WorkspaceEvent{Type: workspacev1.WorkspaceEvent_DELETED, Workspace: &workspacev1.Workspace{Name: key.Name, Namespace: key.Namespace, Owner: user}}
			if err := stream.Send(ev); err != nil {
				return err
			}
		}
	}
	return nil
}

// watched is what a Watch stream has told of a workspace: a change to either is an event.
type watched struct {
	phase      infrav1alpha1.WorkspacePhase
	idleStopAt string
}

func watchedOf(ws *infrav1alpha1.Workspace) watched {
	w := watched{phase: ws.Status.Phase}
	if t := ws.Status.IdleStopAt; t != nil {
		w.idleStopAt = t.UTC().Format(time.RFC3339)
	}
	return w
}

func toV1OrNil(ws *infrav1alpha1.Workspace) *workspacev1.Workspace {
	if ws == nil {
		return nil
	}
	return toV1(ws)
}

func toV1(ws *infrav1alpha1.Workspace) *workspacev1.Workspace {
	out := &workspacev1.Workspace{
		Name: ws.Name, Namespace: ws.Namespace, Owner: ws.Spec.Owner, Image: ws.Spec.Image, Port: uint32(ws.Spec.Port),
		Running: ws.Runs(), Phase: string(ws.Status.Phase), Message: ws.Status.Message,
		NodeName: ws.Status.NodeName, PodIp: ws.Status.PodIP, Url: ws.Status.URL,
		RetainStorage: ws.Spec.Storage.ReclaimPolicy == infrav1alpha1.ReclaimRetain, StoppedReason: ws.Status.StoppedReason,
	}
	if t := ws.Status.IdleStopAt; t != nil {
		out.IdleStopAt = t.UTC().Format(time.RFC3339)
	}
	if d := ws.Spec.IdleTimeout; d != nil {
		out.IdleTimeout = d.Duration.String()
	}
	if q := ws.Spec.Resources.CPU; q != nil {
		out.Cpu = q.String()
	}
	if q := ws.Spec.Resources.Memory; q != nil {
		out.Memory = q.String()
	}
	if q := ws.Spec.Storage.Size; q != nil {
		out.Storage = q.String()
	}
	if ws.Spec.Git != nil {
		out.GitUrl = ws.Spec.Git.URL
	}
	return out
}
