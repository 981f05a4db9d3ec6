package controllers

import "fmt"

// Config is the operator's settings for the kinds it ships.
type Config struct {
	Workspace WorkspaceConfig
	VM        VMConfig
	// GenericDaemon is what a GenericDaemon may ask for beyond the safe defaults.
	GenericDaemon GenericDaemonConfig
	// WorkspaceIngress binds workspace ingress hosts to their workspaces.
	WorkspaceIngress WorkspaceIngressConfig
	// Egress bounds where workspace IDEs and VM launcher pods may connect to.
	Egress EgressConfig
	// Namespaces are the namespaces the operator serves; empty: every namespace.
	Namespaces []string
}

// Validate checks the settings an admin gave, so that a typo stops the operator at start
// rather than every workspace at its first reconcile.
func (c Config) Validate() error {
	if c.Workspace.MaxFailedStarts < 0 {
		return fmt.Errorf("--workspace-max-failed-starts is %d: give 0 (never stop a workspace) or more", c.Workspace.MaxFailedStarts)
	}
	if c.Workspace.IdleTimeout < 0 || c.Workspace.IdleWarning < 0 {
		return fmt.Errorf("--workspace-idle-timeout %s, --workspace-idle-warning %s: durations must not be negative", c.Workspace.IdleTimeout, c.Workspace.IdleWarning)
	}
	if c.VM.MaxFailedStarts < 0 {
		return fmt.Errorf("--vm-max-failed-starts is %d: give 0 (never stop a VM) or more", c.VM.MaxFailedStarts)
	}
	if c.VM.IdleTimeout < 0 || c.VM.IdleWarning < 0 {
		return fmt.Errorf("--vm-idle-timeout %s, --vm-idle-warning %s: durations must not be negative", c.VM.IdleTimeout, c.VM.IdleWarning)
	}
	if err := c.Workspace.validateStale(); err != nil {
		return err
	}
	if err := c.WorkspaceIngress.validate(); err != nil {
		return err
	}
	return c.Egress.validate()
}
