package controllers

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/cloudspace-dev/cloudspace-operator/internal/engine"
)

// egressPolicy renders chart's NetworkPolicy for a CR of kind with spec, with egress cfg.
func egressPolicy(t *testing.T, chart, kind, spec string, cfg EgressConfig) *networkingv1.NetworkPolicy {
	t.Helper()
	var lc engine.Lifecycle = workspaceTenancy{WorkspaceLifecycle: WorkspaceLifecycle{WorkspaceConfig: goldenWorkspaceConfig}, egress: cfg.values()}
	if kind == "VirtualMachine" {
		lc = vmTenancy{VirtualMachineLifecycle: VirtualMachineLifecycle{VMConfig: DefaultVMConfig()}, egress: cfg.values()}
	}
	for _, o := range renderCR(t, chart, lc, kind, spec) {
		if o.GetKind() == "NetworkPolicy" {
			np := &networkingv1.NetworkPolicy{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, np); err != nil {
				t.Fatal(err)
			}
			return np
		}
	}
	return nil
}

// TestEgressPolicies: what an IDE or a VM may reach, for the default settings and an admin's.
func TestEgressPolicies(t *testing.T) {
	custom := EgressConfig{DeniedCIDRs: []string{"10.96.0.0/12", "fd00::/8"}, AllowedCIDRs: []string{"10.20.30.40/32"},
		DNSNamespace: "openshift-dns", DNSPodLabels: map[string]string{"dns.operator.openshift.io/daemonset-dns": "default"}, DNSPorts: []int32{5353}}
	for _, kind := range []struct{ chart, kind, spec string }{
		{chart: "workspace", kind: "Workspace", spec: "{owner: alice}"},
		{chart: "virtualmachine", kind: "VirtualMachine", spec: "{}"},
	} {
		cases := []struct {
			name               string
			cfg                EgressConfig
			dnsNS              string
			dnsPort            int32
			v4Except, v6Except []string
			allowed            []string
		}{
			{name: "defaults", cfg: EgressConfig{}, dnsNS: "kube-system", dnsPort: 53, v4Except: DefaultEgressDeniedCIDRs[:5],
				v6Except: DefaultEgressDeniedCIDRs[5:]},
			{name: "an admin's", cfg: custom, dnsNS: "openshift-dns", dnsPort: 5353, v4Except: []string{"10.96.0.0/12"},
				v6Except: []string{"fd00::/8"}, allowed: []string{"10.20.30.40/32"}},
		}
		for _, tc := range cases {
			t.Run(kind.kind+", "+tc.name, func(t *testing.T) {
				np := egressPolicy(t, kind.chart, kind.kind, kind.spec, tc.cfg)
				if np == nil || !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) {
					t.Fatalf("policy %+v does not bound egress", np)
				}
				checkEgress(t, np.Spec.Egress, tc.dnsNS, tc.dnsPort, tc.v4Except, tc.v6Except, tc.allowed)
			})
		}
		if np := egressPolicy(t, kind.chart, kind.kind, kind.spec, EgressConfig{Unrestricted: true}); np != nil && (len(np.Spec.Egress) > 0 || slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress)) {
			t.Errorf("%s, unrestricted: egress is still bounded: %+v", kind.kind, np.Spec)
		}
	}
}

func checkEgress(t *testing.T, rules []networkingv1.NetworkPolicyEgressRule, dnsNS string, dnsPort int32, v4, v6, allowed []string) {
	t.Helper()
	if want := 2 + min(len(allowed), 1); len(rules) != want {
		t.Fatalf("%d egress rules, want %d: %+v", len(rules), want, rules)
	}
	dns := rules[0]
	if dns.To[0].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != dnsNS || dns.To[0].PodSelector == nil ||
		len(dns.Ports) != 2 || dns.Ports[0].Port.IntVal != dnsPort || *dns.Ports[0].Protocol != corev1.ProtocolUDP || *dns.Ports[1].Protocol != corev1.ProtocolTCP {
		t.Errorf("DNS rule = %+v, want UDP and TCP %d to pods in %s", dns, dnsPort, dnsNS)
	}
	internet := rules[1].To
	if len(rules[1].Ports) != 0 || len(internet) != 2 || internet[0].IPBlock.CIDR != "0.0.0.0/0" || !slices.Equal(internet[0].IPBlock.Except, v4) ||
		internet[1].IPBlock.CIDR != "::/0" || !slices.Equal(internet[1].IPBlock.Except, v6) {
		t.Errorf("internet rule = %+v, want all but %v and %v", rules[1], v4, v6)
	}
	if len(allowed) > 0 && (len(rules[2].To) != len(allowed) || rules[2].To[0].IPBlock.CIDR != allowed[0] || rules[2].To[0].IPBlock.Except != nil) {
		t.Errorf("allowed rule = %+v, want %v", rules[2], allowed)
	}
}

// TestEgressFlagsAndValidateShareTheirRules: a value the flag refuses is refused by Validate too
// (a Config built without the flags), and both errors name the value; Validate's names the flag.
func TestEgressFlagsAndValidateShareTheirRules(t *testing.T) {
	for _, tc := range []struct {
		name, flag, value string
		cfg               EgressConfig
		says              string // in both errors
	}{
		{name: "port 0", flag: "egress-dns-port", value: "0",
			cfg: EgressConfig{DNSPorts: []int32{0}}, says: "0 is not a port"},
		{name: "a port beyond 65535", flag: "egress-dns-port", value: "70000",
			cfg: EgressConfig{DNSPorts: []int32{70000}}, says: "70000 is not a port"},
		{name: "a label value with a space", flag: "egress-dns-pod-label", value: "k8s-app=kube dns",
			cfg: EgressConfig{DNSPodLabels: map[string]string{"k8s-app": "kube dns"}}, says: "k8s-app=kube dns is not a valid label"},
		{name: "a label key with a space", flag: "egress-dns-pod-label", value: "k8s app=kube-dns",
			cfg: EgressConfig{DNSPodLabels: map[string]string{"k8s app": "kube-dns"}}, says: "k8s app=kube-dns is not a valid label"},
		{name: "a host name for a denied CIDR", flag: "egress-denied-cidr", value: "git.example.com",
			cfg: EgressConfig{DeniedCIDRs: []string{"git.example.com"}}, says: `"git.example.com" is not a CIDR`},
		{name: "a host name for an allowed CIDR", flag: "egress-allowed-cidr", value: "git.example.com",
			cfg: EgressConfig{AllowedCIDRs: []string{"git.example.com"}}, says: `"git.example.com" is not a CIDR`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := parseFlags("--" + tc.flag + "=" + tc.value); err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("--%s=%s: %v, want a refusal saying %q", tc.flag, tc.value, err, tc.says)
			}
			err := Config{Egress: tc.cfg}.Validate()
			if err == nil || !strings.HasPrefix(err.Error(), "--"+tc.flag+": ") || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("Validate: %v, want a refusal naming --%s and saying %q", err, tc.flag, tc.says)
			}
		})
	}
	if err := parseFlags("--egress-dns-port=dns"); err == nil || !strings.Contains(err.Error(), `"dns" is not a port number`) {
		t.Errorf("--egress-dns-port=dns: %v, want a refusal naming the value", err)
	}
}
