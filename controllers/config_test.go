package controllers

import "testing"

func TestConfigValidate(t *testing.T) {
	for _, bad := range []Config{
		{Egress: EgressConfig{DeniedCIDRs: []string{"10.0.0.1/8"}}},
		{Egress: EgressConfig{DeniedCIDRs: []string{"0.0.0.0/0"}}},
		{Egress: EgressConfig{AllowedCIDRs: []string{"git.example.com"}}},
		{Egress: EgressConfig{DNSPorts: []int32{0}}},
		{Egress: EgressConfig{DNSPodLabels: map[string]string{"k8s-app": "kube dns"}}},
		{WorkspaceIngress: WorkspaceIngressConfig{HostPattern: "{owner}.{tenant}.example.com"}},
	} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	if err := (Config{}).Validate(); err != nil {
		t.Errorf("the defaults are refused: %v", err)
	}
}
