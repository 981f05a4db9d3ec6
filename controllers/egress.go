package controllers

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

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

// validate refuses what the API server would refuse in a NetworkPolicy, naming the flag that
// sets it: a Config may be built without the flags, which check only the syntax.
func (c EgressConfig) validate() error {
	for _, s := range c.DeniedCIDRs {
		if err := validPolicyCIDR(s, true); err != nil {
			return fmt.Errorf("--egress-denied-cidr: %w", err)
		}
	}
	for _, s := range c.AllowedCIDRs {
		if err := validPolicyCIDR(s, false); err != nil {
			return fmt.Errorf("--egress-allowed-cidr: %w", err)
		}
	}
	for _, p := range c.DNSPorts {
		if err := validPort(int64(p)); err != nil {
			return fmt.Errorf("--egress-dns-port: %w", err)
		}
	}
	for k, v := range c.DNSPodLabels {
		if err := validLabel(k, v); err != nil {
			return fmt.Errorf("--egress-dns-pod-label: %w", err)
		}
	}
	return nil
}

// validPolicyCIDR refuses a CIDR an ipBlock cannot hold: not canonical, or, as an exception
// (a denied range), all of the internet, which no ipBlock may except.
func validPolicyCIDR(s string, exception bool) error {
	p, err := parseCIDR(s)
	switch {
	case err != nil:
		return err
	case p.Masked() != p:
		return fmt.Errorf("%q has host bits set; did you mean %s?", s, p.Masked())
	case exception && p.Bits() == 0:
		return fmt.Errorf("%q is all of the internet, which an ipBlock cannot except", s)
	}
	return nil
}

// parseCIDR parses s, a CIDR such as 10.1.2.3/32.
func parseCIDR(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not a CIDR: %w", s, err)
	}
	return p, nil
}

// validPort refuses a number that is no TCP or UDP port.
func validPort(p int64) error {
	if p < 1 || p > 65535 {
		return fmt.Errorf("%d is not a port (1 to 65535)", p)
	}
	return nil
}

// validLabel refuses a label key and value the API server would refuse, saying why.
func validLabel(key, value string) error {
	if errs := append(validation.IsQualifiedName(key), validation.IsValidLabelValue(value)...); len(errs) > 0 {
		return fmt.Errorf("%s=%s is not a valid label: %s", key, value, strings.Join(errs, "; "))
	}
	return nil
}
