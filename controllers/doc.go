// Package controllers is the Go code of the kinds the operator ships (GenericDaemon, Workspace,
// VirtualMachine). It holds no controller: the engine (internal/engine) is the one reconciler of
// every watches.yaml entry, rendering, applying and reporting status; this package gives it what
// only a kind knows. The directory keeps Operator SDK's name, which the hybrid layout expects.
//
// It holds:
//   - each kind's lifecycle (engine.Lifecycle): values from the typed spec, status from the
//     observed children and pods, what outlives a delete and who may adopt it; with what bounds
//     one tenant from another (a workspace's ingress host claim, the egress policy);
//   - the VirtualMachine admission webhooks, which default and validate as the lifecycle does;
//   - the loops that run on the leader beside the engine (leaderLoop): the IDE and VM activity
//     probes that feed the idle stop, the review of kept volumes and the stale workspace reaper;
//   - the kinds' metrics (start times, stops by the operator);
//   - the registry that hands the lifecycles and loops to the manager (Setup, Lifecycles), and
//     the kinds' settings (Config) with their flags (DefaultConfig, Config.BindFlags).
package controllers
