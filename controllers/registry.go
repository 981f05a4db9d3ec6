package controllers

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/engine"
	"github.com/cloudspace-dev/cloudspace-operator/internal/watches"
)

// The kinds that have a Go lifecycle here.
var (
	genericDaemonGVK = infrav1alpha1.GroupVersion.WithKind("GenericDaemon")
	workspaceGVK     = infrav1alpha1.GroupVersion.WithKind("Workspace")
	vmGVK            = infrav1alpha1.GroupVersion.WithKind("VirtualMachine")
)

// Lifecycles are the Go lifecycles of the kinds this operator ships, with the operator's
// settings; a watches.yaml kind not listed here is a pure chart kind. Without a manager there
// is no cache of Workspaces: ingress hosts are checked against the pattern only.
func Lifecycles(cfg Config) []engine.Option {
	return lifecycles(cfg, nil)
}

func lifecycles(cfg Config, workspaces client.Reader) []engine.Option {
	egress := cfg.Egress.values()
	return []engine.Option{
		engine.WithLifecycle(genericDaemonGVK, GenericDaemonLifecycle{GenericDaemonConfig: cfg.GenericDaemon}),
		engine.WithLifecycle(workspaceGVK, workspaceTenancy{
			WorkspaceLifecycle: WorkspaceLifecycle{WorkspaceConfig: cfg.Workspace},
			ingress:            cfg.WorkspaceIngress, workspaces: workspaces, egress: egress,
		}),
		engine.WithLifecycle(vmGVK, vmTenancy{
			VirtualMachineLifecycle: VirtualMachineLifecycle{VMConfig: cfg.VM}, egress: egress,
		}),
	}
}

// Setup serves every watches.yaml entry with the engine, with the shipped kinds' lifecycles,
// and adds the leader loops their settings ask for. The Workspaces' ingress hosts are indexed
// in the manager's cache (the engine's own view of them), so that who holds a host is a
// lookup, not a list of every workspace.
func Setup(mgr ctrl.Manager, ws []watches.Watch, cfg Config, opts ...engine.Option) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	var workspaces client.Reader
	if ServesWorkspaces(ws) {
		if err := IndexWorkspaceHosts(context.Background(), mgr.GetFieldIndexer()); err != nil {
			return err
		}
		workspaces = mgr.GetCache()
	}
	for _, loop := range leaderLoops(mgr, ws, cfg) {
		if err := mgr.Add(loop); err != nil {
			return fmt.Errorf("adding the leader loop %s: %w", loop.what, err)
		}
	}
	return engine.Setup(mgr, ws, append(lifecycles(cfg, workspaces), opts...)...)
}

// leaderLoops are the loops the served kinds' settings ask for: the IDE and VM activity
// probes where an idle stop may apply, the kept volume review and the stale workspace reaper.
func leaderLoops(mgr ctrl.Manager, ws []watches.Watch, cfg Config) []leaderLoop {
	var loops []leaderLoop
	if ServesWorkspaces(ws) && cfg.Workspace.Activity != nil {
		probe := newIDEActivityProbe(mgr.GetCache(), cfg.Workspace)
		loops = append(loops, leaderLoop{"reading the IDEs' activity", probe.interval, probe.probeAll})
	}
	if ServesWorkspaces(ws) && cfg.Workspace.StaleAfter > 0 {
		kept := newRetainedVolumes(mgr, cfg.Workspace, cfg.Namespaces)
		loops = append(loops, leaderLoop{"reviewing kept volumes", kept.interval, kept.sweep})
	}
	if ServesWorkspaces(ws) && cfg.Workspace.DeleteStaleAfter > 0 {
		reaper := newStaleReaper(mgr, cfg.Workspace)
		loops = append(loops, leaderLoop{"deleting stale workspaces", reaper.interval, reaper.reap})
	}
	if ServesVMs(ws) && cfg.VM.Activity != nil && len(cfg.VM.AccessKey) > 0 {
		probe := newVMActivityProbe(mgr.GetCache(), cfg.VM)
		loops = append(loops, leaderLoop{"reading the VMs' activity", probe.interval, probe.probeAll})
	}
	return loops
}

// ServesWorkspaces reports whether the watches file serves Workspace, the only kind that needs
// the workspace API.
func ServesWorkspaces(ws []watches.Watch) bool {
	return serves(ws, workspaceGVK)
}

// NeedsAccessKey reports whether the watches file serves a kind that derives credentials from
// the operator key (internal/access): Workspace (IDE passwords) and VirtualMachine (the
// launcher's activity endpoint).
func NeedsAccessKey(ws []watches.Watch) bool {
	return serves(ws, workspaceGVK) || serves(ws, vmGVK)
}

// ServesVMs reports whether the watches file serves VirtualMachine.
func ServesVMs(ws []watches.Watch) bool {
	return serves(ws, vmGVK)
}

func serves(ws []watches.Watch, gvk schema.GroupVersionKind) bool {
	return slices.ContainsFunc(ws, func(w watches.Watch) bool { return w.GroupVersionKind() == gvk })
}
