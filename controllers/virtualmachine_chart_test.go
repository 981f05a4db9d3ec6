package controllers

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// renderLauncherPod renders the VM chart's pod backend for spec under cfg.
func renderLauncherPod(t *testing.T, cfg VMConfig, spec string) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{}
	renderChild(t, "virtualmachine", VirtualMachineLifecycle{VMConfig: cfg}, "VirtualMachine", spec, p)
	return p
}

// TestLauncherPodRunsAsARealNodeNeeds holds what running the launcher on real nodes taught.
func TestLauncherPodRunsAsARealNodeNeeds(t *testing.T) {
	cases := []struct {
		name        string
		kvm         string
		cpu         string
		wantMemory  string
		wantEnvAccl string
	}{
		// Software emulation: a 1Gi guest was OOM-killed with 256Mi of overhead.
		{name: "software emulation", cpu: "1", wantMemory: "1536Mi", wantEnvAccl: "tcg"},
		{name: "software emulation, 4 vCPUs", cpu: "4", wantMemory: "1728Mi", wantEnvAccl: "tcg"},
		{name: "kvm", kvm: "devices.kubevirt.io/kvm", cpu: "4", wantMemory: "1280Mi", wantEnvAccl: "kvm"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultVMConfig()
			cfg.KVMResource = tc.kvm
			pod := renderLauncherPod(t, cfg, "{cpu: '"+tc.cpu+"', memory: 1Gi, firmware: UEFI, cpuModel: 'EPYC,+avx2'}")
			c := pod.Spec.Containers[0]
			if got := c.Resources.Limits[corev1.ResourceMemory]; got.Cmp(resource.MustParse(tc.wantMemory)) != 0 {
				t.Errorf("memory limit %s, want %s", got.String(), tc.wantMemory)
			}
			if envValue(c, "VM_ACCEL") != tc.wantEnvAccl || envValue(c, "VM_FIRMWARE") != "uefi" || envValue(c, "VM_CPU_MODEL") != "EPYC,+avx2" || envValue(c, "VM_SSH_PORT") != "22" {
				t.Errorf("env = %v", c.Env)
			}
			// Port 22 is forwarded as uid 107: only the pod's sysctl lets a non-root process
			// bind it (containerd 1.x does not set it; a capability is never effective).
			sysctls := pod.Spec.SecurityContext.Sysctls
			if len(sysctls) != 1 || sysctls[0].Name != "net.ipv4.ip_unprivileged_port_start" || sysctls[0].Value != "0" {
				t.Errorf("sysctls = %v, want net.ipv4.ip_unprivileged_port_start=0", sysctls)
			}
			if c.SecurityContext.Capabilities != nil && len(c.SecurityContext.Capabilities.Add) > 0 {
				t.Errorf("capabilities added %v: a non-root container never has them effective", c.SecurityContext.Capabilities.Add)
			}
			// QEMU's user network accepts a TCP connection at once: readiness asks the guest.
			if p := c.ReadinessProbe; p == nil || p.Exec == nil || strings.Join(p.Exec.Command, " ") != "/usr/local/bin/vm-launcher probe" || p.TimeoutSeconds < 3 {
				t.Errorf("readiness probe %+v, want the launcher's exec probe", p)
			}
			if !c.Stdin || !c.TTY {
				t.Error("the console takes no input: stdin and tty must be set for kubectl attach")
			}
			// The guest grows the boot disk's copy; the console's copy grows with its output.
			limits := map[string]resource.Quantity{"boot-disk": cfg.BootDiskLimit, "run": resource.MustParse("64Mi")}
			for _, v := range pod.Spec.Volumes {
				if want, ok := limits[v.Name]; ok {
					if v.EmptyDir == nil || v.EmptyDir.SizeLimit == nil || v.EmptyDir.SizeLimit.Cmp(want) != 0 {
						t.Errorf("volume %s: %+v, want an emptyDir limited to %s", v.Name, v.VolumeSource, want.String())
					}
					delete(limits, v.Name)
				}
			}
			if len(limits) > 0 {
				t.Errorf("volumes missing: %v", limits)
			}
		})
	}
}
