package controllers

import (
	"cmp"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/cloudspace-dev/cloudspace-operator/internal/workspace"
)

// DefaultConfig is the kinds' settings when the operator's flags set nothing: BindFlags takes
// its flags' defaults from it, so that they are written once, here and in what it calls.
func DefaultConfig() Config {
	return Config{
		Workspace: WorkspaceConfig{
			Limits:          workspace.DefaultLimits(),
			AccessKeySecret: "cloudspace-operator-system/cloudspace-workspace-access-key",
			MaxFailedStarts: DefaultMaxFailedStarts,
			IdleWarning:     DefaultIdleWarning,
			IDEAuth:         IDEAuthPassword,
		},
		VM:               DefaultVMConfig(),
		WorkspaceIngress: WorkspaceIngressConfig{Recheck: DefaultIngressHostRecheck},
		Egress:           EgressConfig{DNSNamespace: defaultDNSNamespace},
	}
}

// BindFlags registers every kind's flags on fs, bound to c, whose values are their defaults
// (DefaultConfig): the operator's command line for the kinds it ships.
func (c *Config) BindFlags(fs *flag.FlagSet) {
	c.Workspace.BindFlags(fs)
	c.VM.BindFlags(fs)
	c.GenericDaemon.BindFlags(fs)
	c.WorkspaceIngress.BindFlags(fs)
	c.Egress.BindFlags(fs)
}

// BindFlags registers the --workspace-* flags of the Workspace kind, bound to c.
func (c *WorkspaceConfig) BindFlags(fs *flag.FlagSet) {
	quantityFlag(fs, &c.Limits.CPU, "workspace-max-cpu", "The most CPU one workspace may have, through any door.")
	quantityFlag(fs, &c.Limits.Memory, "workspace-max-memory", "The most memory one workspace may have, through any door.")
	quantityFlag(fs, &c.Limits.Storage, "workspace-max-storage", "The largest volume one workspace may have, through any door.")
	fs.IntVar(&c.MaxFailedStarts, "workspace-max-failed-starts", c.MaxFailedStarts,
		"Failed starts (the IDE exits before it is ready) after which the operator stops a workspace, keeping its storage; 0 never stops one.")
	fs.DurationVar(&c.IdleTimeout, "workspace-idle-timeout", c.IdleTimeout,
		"Stop a workspace whose IDE is unused this long (no editor or terminal session, no API call), keeping its storage; 0 stops only those whose spec.idleTimeout asks. A spec may ask for less, never more.")
	fs.DurationVar(&c.IdleWarning, "workspace-idle-warning", c.IdleWarning,
		"How long before an idle stop the workspace says so (status.idleStopAt, on Watch); at most half the idle timeout.")
	fs.DurationVar(&c.StaleAfter, "workspace-stale-after", c.StaleAfter,
		"Report a workspace stopped and untouched (no spec change, no API call) this long as stale (status.staleSince, a Stale event), and a volume kept after delete that no workspace took back this long (an annotation and an event on the claim); 0 reports none.")
	fs.DurationVar(&c.DeleteStaleAfter, "workspace-delete-stale-after", c.DeleteStaleAfter,
		"Delete a workspace stopped and untouched this long, its volume going or staying by its reclaimPolicy, and a kept volume taken back by none this long; must exceed --workspace-stale-after, which gives the notice (status.deleteAt, the claim's delete-at annotation); 0 deletes none.")
	fs.StringVar(&c.AccessKeySecret, "workspace-access-key-secret", c.AccessKeySecret,
		"namespace/name of the Secret holding the operator key each IDE's password and each VM launcher's activity credentials are derived from; created with a random key when missing.")
	bindRepeatable(fs,
		repeatable{"workspace-ingress-annotation",
			"key=value set on every workspace Ingress, e.g. cert-manager.io/cluster-issuer=letsencrypt (repeatable).",
			annotationFlag(&c.IngressAnnotations)},
		repeatable{"workspace-ingress-controller-namespace",
			"Namespace of the ingress controller that serves workspace Ingresses, which each workspace's NetworkPolicy admits (repeatable); when none is given, namespaces labelled infra.cloudspace.dev/workspace-access=true.",
			namespaceFlag(&c.IngressControllerNamespaces)})
	fs.Func("workspace-ide-auth", `Who the IDEs trust: "password" (default), each workspace's own, or "gateway", none asked, the web gateway's pods alone admitted by each workspace's NetworkPolicy and no Ingress allowed.`,
		func(v string) error {
			if a := IDEAuth(v); a != IDEAuthPassword && a != IDEAuthGateway {
				return fmt.Errorf("%q is neither %q nor %q", v, IDEAuthPassword, IDEAuthGateway)
			}
			c.IDEAuth = IDEAuth(v)
			return nil
		})
	// OLM's mirrored installs set the operand images in RELATED_IMAGE_* variables.
	fs.StringVar(&c.IDEImage, "workspace-ide-image", cmp.Or(os.Getenv("RELATED_IMAGE_WORKSPACE_IDE"), c.IDEImage),
		"Image that runs in place of the default IDE image, e.g. its mirror (env RELATED_IMAGE_WORKSPACE_IDE); workspaces naming their own image keep it.")
}

// BindFlags registers the --vm-* flags of the VirtualMachine kind, bound to c.
func (c *VMConfig) BindFlags(fs *flag.FlagSet) {
	// OLM's mirrored installs set the operand images in RELATED_IMAGE_* variables.
	fs.StringVar(&c.DefaultImage, "vm-default-image", cmp.Or(os.Getenv("RELATED_IMAGE_VM_CONTAINERDISK"), c.DefaultImage),
		"Container disk of a VirtualMachine that names none.")
	fs.StringVar(&c.LauncherImage, "vm-launcher-image", cmp.Or(os.Getenv("RELATED_IMAGE_VM_LAUNCHER"), c.LauncherImage),
		"Image that runs QEMU for the pod backend (images/vm-launcher).")
	fs.StringVar(&c.KVMResource, "vm-kvm-resource", c.KVMResource,
		"Extended resource a device plugin grants /dev/kvm with; empty runs guests in software emulation.")
	fs.Int64Var(&c.MaxCPU, "vm-max-cpu", c.MaxCPU, "The most CPUs one VirtualMachine may have.")
	quantityFlag(fs, &c.MaxMemory, "vm-max-memory", "The most memory one VirtualMachine may have.")
	quantityFlag(fs, &c.MaxDisk, "vm-max-disk", "The largest volume one VirtualMachine may have: its data disk, and its Persistent root disk, each.")
	fs.IntVar(&c.MaxFailedStarts, "vm-max-failed-starts", c.MaxFailedStarts,
		"Failed starts (the launcher exits with a failure before the guest answers) after which the operator stops a VM, keeping its disk; 0 never stops one.")
	fs.DurationVar(&c.IdleTimeout, "vm-idle-timeout", c.IdleTimeout,
		"Stop a VM (pod backend) unused this long (no connection to its forwarded TCP ports, no console input), keeping its disk; 0 stops only those whose spec.idleTimeout asks. A spec may ask for less, never more. Setting or unsetting it replaces the running launchers it applies to (a reboot).")
	fs.DurationVar(&c.IdleWarning, "vm-idle-warning", c.IdleWarning,
		"How long before an idle stop the VM says so (status.idleStopAt, an IdleWarning event); at most half the idle timeout.")
	quantityFlag(fs, &c.BootDiskLimit, "vm-boot-disk-limit",
		"The most an Ephemeral root disk's copy may grow to in a VM's launcher pod (the guest writes its root filesystem there); the kubelet evicts the pod beyond it.")
}

// BindFlags registers the --genericdaemon-* flags, which hand out what a daemon may ask for.
func (c *GenericDaemonConfig) BindFlags(fs *flag.FlagSet) {
	fs.Func("genericdaemon-allowed-toleration", "A toleration GenericDaemons may carry: key, key=value, either with :Effect, or * for every key (repeatable); none by default.",
		TolerationFlag(&c.AllowedTolerations))
	fs.Func("genericdaemon-allowed-resource", "An extended resource GenericDaemons may request besides cpu, memory and ephemeral-storage, e.g. nvidia.com/gpu (repeatable); none by default.",
		ResourceNameFlag(&c.AllowedExtendedResources))
}

// BindFlags registers the --workspace-ingress-host-* flags, bound to c.
func (c *WorkspaceIngressConfig) BindFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.HostPattern, "workspace-ingress-host-pattern", c.HostPattern,
		"The only ingress host a workspace may have, with {owner}, {name} and {namespace} replaced, e.g. {owner}-{name}.ide.example.com; when empty any host, held by the workspace that claimed it first.")
	fs.DurationVar(&c.Recheck, "workspace-ingress-host-recheck", c.Recheck,
		"How often a workspace whose ingress host another workspace holds looks again.")
}

// BindFlags registers the --egress-* flags, bound to c.
func (c *EgressConfig) BindFlags(fs *flag.FlagSet) {
	fs.BoolVar(&c.Unrestricted, "egress-unrestricted", c.Unrestricted, "Leave the egress of workspace IDEs and VMs open.")
	fs.StringVar(&c.DNSNamespace, "egress-dns-namespace", c.DNSNamespace, "Namespace of the cluster's DNS pods, which workspace IDEs and VMs may query.")
	bindRepeatable(fs,
		repeatable{"egress-denied-cidr",
			"A CIDR workspace IDEs and VMs may not reach (repeatable); given at all, it replaces the defaults " + strings.Join(DefaultEgressDeniedCIDRs, ", ") + ".",
			CIDRFlag(&c.DeniedCIDRs)},
		repeatable{"egress-allowed-cidr",
			"A CIDR workspace IDEs and VMs may reach on every port even inside a denied one, e.g. an internal git host's 10.1.2.3/32 (repeatable).",
			CIDRFlag(&c.AllowedCIDRs)},
		repeatable{"egress-dns-pod-label", "key=value label of the cluster's DNS pods (repeatable); k8s-app=kube-dns when none.",
			LabelFlag(&c.DNSPodLabels)},
		repeatable{"egress-dns-port", "Port the DNS pods serve on, UDP and TCP (repeatable); 53 when none (OpenShift: 5353).",
			PortFlag(&c.DNSPorts)})
}

// repeatable is a flag given once for each value, which set checks and keeps: a list's flags
// have no default of their own (their help says what applies when none is given).
type repeatable struct {
	name, usage string
	set         func(string) error
}

// bindRepeatable registers each flag on fs.
func bindRepeatable(fs *flag.FlagSet, flags ...repeatable) {
	for _, f := range flags {
		fs.Func(f.name, f.usage, f.set)
	}
}

// quantityFlag binds a positive quantity flag to q, whose value is the default.
func quantityFlag(fs *flag.FlagSet, q *resource.Quantity, name, usage string) {
	fs.Func(name, fmt.Sprintf("%s (default %s)", usage, q.String()), func(v string) error {
		p, err := resource.ParseQuantity(v)
		if err != nil || p.Sign() <= 0 {
			return fmt.Errorf("%q is not a positive quantity", v)
		}
		*q = p
		return nil
	})
}

// annotationFlag parses key=value into *m, refusing keys the API server would refuse.
func annotationFlag(m *map[string]string) func(string) error {
	return func(v string) error {
		k, val, ok := strings.Cut(v, "=")
		if !ok {
			return fmt.Errorf("%q is not key=value", v)
		}
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return fmt.Errorf("annotation key %q: %s", k, strings.Join(errs, "; "))
		}
		if *m == nil {
			*m = map[string]string{}
		}
		(*m)[k] = val
		return nil
	}
}

// namespaceFlag appends each value, a namespace name, to list.
func namespaceFlag(list *[]string) func(string) error {
	return func(ns string) error {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return fmt.Errorf("%q is not a namespace name: %s", ns, strings.Join(errs, "; "))
		}
		*list = append(*list, ns)
		return nil
	}
}

// CIDRFlag appends each value, a CIDR such as 10.1.2.3/32, to list: a repeatable flag.
func CIDRFlag(list *[]string) func(string) error {
	return func(v string) error {
		if _, err := parseCIDR(v); err != nil {
			return err
		}
		*list = append(*list, v)
		return nil
	}
}

// LabelFlag sets each value, key=value, in *m: a repeatable flag.
func LabelFlag(m *map[string]string) func(string) error {
	return func(v string) error {
		k, val, ok := strings.Cut(v, "=")
		if !ok {
			return fmt.Errorf("%q is not a label key=value", v)
		}
		if err := validLabel(k, val); err != nil {
			return err
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
		if err != nil {
			return fmt.Errorf("%q is not a port number", v)
		}
		if err := validPort(p); err != nil {
			return err
		}
		*list = append(*list, int32(p))
		return nil
	}
}
