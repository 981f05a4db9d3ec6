// Package controllers holds the Go lifecycle of each kind the operator ships — values from the
// typed spec, status projection, what outlives a delete — and the registry that hands them to
// the engine (internal/engine), which does all reading and writing.
package controllers

import (
	ctrl "sigs.k8s.io/controller-runtime"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/engine"
	"github.com/cloudspace-dev/cloudspace-operator/internal/watches"
)

// Config is the operator's settings for the kinds it ships.
type Config struct {
	Workspace WorkspaceConfig
	VM        VMConfig
}

// Lifecycles are the Go lifecycles of the kinds this operator ships, with the operator's
// settings; a watches.yaml kind not listed here is a pure chart kind.
func Lifecycles(cfg Config) []engine.Option {
	return []engine.Option{
		engine.WithLifecycle(infrav1alpha1.GroupVersion.WithKind("GenericDaemon"), GenericDaemonLifecycle{}),
		engine.WithLifecycle(infrav1alpha1.GroupVersion.WithKind("Workspace"), WorkspaceLifecycle{WorkspaceConfig: cfg.Workspace}),
		engine.WithLifecycle(infrav1alpha1.GroupVersion.WithKind("VirtualMachine"), VirtualMachineLifecycle{VMConfig: cfg.VM}),
	}
}

// Setup serves every watches.yaml entry with the engine, with the shipped kinds' lifecycles.
func Setup(mgr ctrl.Manager, ws []watches.Watch, cfg Config, opts ...engine.Option) error {
	return engine.Setup(mgr, ws, append(Lifecycles(cfg), opts...)...)
}
