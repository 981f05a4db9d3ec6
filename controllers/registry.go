package controllers

import (
	"cmp"
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/engine"
	"github.com/cloudspace-dev/cloudspace-operator/internal/watches"
)

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

// Lifecycles are the Go lifecycles of the kinds this operator ships, with the operator's
// settings; a watches.yaml kind not listed here is a pure chart kind. Without a manager there
// is no cache of Workspaces: ingress hosts are checked against the pattern only.
func Lifecycles(cfg Config) []engine.Option {
	return lifecycles(cfg, nil)
}

func lifecycles(cfg Config, workspaces client.Reader) []engine.Option {
	egress := cfg.Egress.values()
	return []engine.Option{
		engine.WithLifecycle(infrav1alpha1.GroupVersion.WithKind("GenericDaemon"), GenericDaemonLifecycle{GenericDaemonConfig: cfg.GenericDaemon}),
		engine.WithLifecycle(workspaceGVK, workspaceTenancy{
			WorkspaceLifecycle: WorkspaceLifecycle{WorkspaceConfig: cfg.Workspace},
			ingress:            cfg.WorkspaceIngress, workspaces: workspaces, egress: egress,
		}),
		engine.WithLifecycle(vmGVK, vmTenancy{
			VirtualMachineLifecycle: VirtualMachineLifecycle{VMConfig: cfg.VM}, egress: egress,
		}),
	}
}

// Setup serves every watches.yaml entry with the engine, with the shipped kinds' lifecycles.
// The Workspaces' ingress hosts are indexed in the manager's cache (the engine's own view of
// them), so that who holds a host is a lookup, not a list of every workspace.
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
		if cfg.Workspace.Activity != nil {
			probe := newActivityProbe(mgr.GetCache(), cfg.Workspace)
			if err := mgr.Add(leaderLoop{"reading the IDEs' activity", cmp.Or(cfg.Workspace.ActivityInterval, DefaultActivityInterval), probe.probeAll}); err != nil {
				return fmt.Errorf("adding the IDE activity probe: %w", err)
			}
		}
		if cfg.Workspace.StaleAfter > 0 {
			kept := newRetainedVolumes(mgr, cfg.Workspace, cfg.Namespaces)
			if err := mgr.Add(leaderLoop{"reviewing kept volumes", cmp.Or(cfg.Workspace.StaleInterval, DefaultStaleInterval), kept.sweep}); err != nil {
				return fmt.Errorf("adding the kept volume review: %w", err)
			}
		}
		if cfg.Workspace.DeleteStaleAfter > 0 {
			reaper := newStaleReaper(mgr, cfg.Workspace)
			if err := mgr.Add(leaderLoop{"deleting stale workspaces", reaper.interval, reaper.reap}); err != nil {
				return fmt.Errorf("adding the stale workspace reaper: %w", err)
			}
		}
	}
	if ServesVMs(ws) && cfg.VM.Activity != nil && len(cfg.VM.AccessKey) > 0 {
		probe := newVMActivityProbe(mgr.GetCache(), cfg.VM)
		if err := mgr.Add(leaderLoop{"reading the VMs' activity", cmp.Or(cfg.VM.ActivityInterval, DefaultActivityInterval), probe.probeAll}); err != nil {
			return fmt.Errorf("adding the VM activity probe: %w", err)
		}
	}
	return engine.Setup(mgr, ws, append(lifecycles(cfg, workspaces), opts...)...)
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

// vmTenancy is VirtualMachine's lifecycle with the egress policy of its launcher pod.
type vmTenancy struct {
	VirtualMachineLifecycle
	egress map[string]any
}

// Values adds the egress policy to the VM's values.
func (l vmTenancy) Values(obj *unstructured.Unstructured) (map[string]any, error) {
	vals, err := l.VirtualMachineLifecycle.Values(obj)
	if err != nil {
		return nil, err
	}
	vals["egress"] = l.egress
	return vals, nil
}

// EgressConfig bounds where a workspace IDE and a VM may connect to. Their NetworkPolicies
// allow DNS to the cluster's DNS pods, the internet but for DeniedCIDRs, and AllowedCIDRs.
// The defaults keep the private ranges (where pod and Service addresses are, on any common
// cluster) and link-local ones (the cloud's metadata address, 169.254.169.254) out of reach:
// one tenant's IDE cannot reach another's VM, the workspace API or the cloud's credentials.
type EgressConfig struct {
	// Unrestricted leaves egress open, as before these policies (the policy stays ingress-only).
	Unrestricted bool
	// DeniedCIDRs are cut out of the internet rule; DefaultEgressDeniedCIDRs when empty.
	DeniedCIDRs []string
	// AllowedCIDRs are reachable on every port whatever DeniedCIDRs says, e.g. an internal git
	// host's address.
	AllowedCIDRs []string
	// DNSNamespace is where the cluster's DNS pods run; kube-system when empty.
	DNSNamespace string
	// DNSPodLabels select the cluster's DNS pods there; k8s-app=kube-dns when empty.
	DNSPodLabels map[string]string
	// DNSPorts are the ports those pods serve DNS on, UDP and TCP (a policy sees the pod's
	// port, not the Service's: OpenShift's DNS pods serve 5353); 53 when empty.
	DNSPorts []int32
}

// defaultDNSNamespace is where the cluster's DNS pods run on most clusters.
const defaultDNSNamespace = "kube-system"

// DefaultEgressDeniedCIDRs are the ranges no IDE or VM reaches by default: RFC 1918, carrier-
// grade NAT (some clusters' pod range), IPv4 and IPv6 link-local, IPv6 unique-local.
var DefaultEgressDeniedCIDRs = []string{
	"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "169.254.0.0/16", "fc00::/7", "fe80::/10",
}

// values are the charts' egress values for c (helm-charts/{workspace,virtualmachine}).
func (c EgressConfig) values() map[string]any {
	denied := c.DeniedCIDRs
	if len(denied) == 0 {
		denied = DefaultEgressDeniedCIDRs
	}
	ns := orDefault(c.DNSNamespace, defaultDNSNamespace)
	podLabels := c.DNSPodLabels
	if len(podLabels) == 0 {
		podLabels = map[string]string{"k8s-app": "kube-dns"}
	}
	ports := []any{int64(53)}
	if len(c.DNSPorts) > 0 {
		ports = make([]any, len(c.DNSPorts))
		for i, p := range c.DNSPorts {
			ports[i] = int64(p)
		}
	}
	return map[string]any{
		"enabled": !c.Unrestricted,
		"dns":     map[string]any{"namespace": ns, "podLabels": stringMap(podLabels), "ports": ports},
		// The API server refuses an IPv4 exception in an IPv6 block and the other way around.
		"deniedIPv4":   stringList(slices.DeleteFunc(slices.Clone(denied), isIPv6CIDR)),
		"deniedIPv6":   stringList(slices.DeleteFunc(slices.Clone(denied), func(s string) bool { return !isIPv6CIDR(s) })),
		"allowedCIDRs": stringList(c.AllowedCIDRs),
	}
}

func isIPv6CIDR(s string) bool { return strings.Contains(s, ":") }

// validate refuses CIDRs the API server would refuse in a NetworkPolicy: not canonical, or
// (for an exception) all of the internet, which no ipBlock may except.
func (c EgressConfig) validate() error {
	for _, list := range []struct {
		flag  string
		cidrs []string
	}{{"denied", c.DeniedCIDRs}, {"allowed", c.AllowedCIDRs}} {
		for _, s := range list.cidrs {
			p, err := netip.ParsePrefix(s)
			switch {
			case err != nil:
				return fmt.Errorf("egress %s CIDR %q: %w", list.flag, s, err)
			case p.Masked() != p:
				return fmt.Errorf("egress %s CIDR %q has host bits set; did you mean %s?", list.flag, s, p.Masked())
			case list.flag == "denied" && p.Bits() == 0:
				return fmt.Errorf("egress denied CIDR %q is all of the internet, which an ipBlock cannot except", s)
			}
		}
	}
	for _, p := range c.DNSPorts {
		if p < 1 || p > 65535 {
			return fmt.Errorf("egress DNS port %d is not a port", p)
		}
	}
	for k, v := range c.DNSPodLabels {
		if len(validation.IsQualifiedName(k)) > 0 || len(validation.IsValidLabelValue(v)) > 0 {
			return fmt.Errorf("egress DNS pod label %s=%s is not a valid label", k, v)
		}
	}
	return nil
}

// CIDRFlag appends each value, a CIDR such as 10.1.2.3/32, to list: a repeatable flag.
func CIDRFlag(list *[]string) func(string) error {
	return func(v string) error {
		if _, err := netip.ParsePrefix(v); err != nil {
			return fmt.Errorf("%q is not a CIDR: %w", v, err)
		}
		*list = append(*list, v)
		return nil
	}
}

// LabelFlag sets each value, key=value, in *m: a repeatable flag.
func LabelFlag(m *map[string]string) func(string) error {
	return func(v string) error {
		k, val, ok := strings.Cut(v, "=")
		if !ok || len(validation.IsQualifiedName(k)) > 0 || len(validation.IsValidLabelValue(val)) > 0 {
			return fmt.Errorf("%q is not a label key=value", v)
		}
		if *m == nil {
			*m = map[string]string{}
		}
		(*m)[k] = val
		return nil
	}
}

// PortFlag appends each value, a port number, to list: a repeatable flag.
func PortFlag(list *[]int32) func(string) error {
	return func(v string) error {
		p, err := strconv.ParseInt(v, 10, 32)
		if err != nil || p < 1 || p > 65535 {
			return fmt.Errorf("%q is not a port", v)
		}
		*list = append(*list, int32(p))
		return nil
	}
}
