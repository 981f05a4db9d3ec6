package controllers

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
			pod := renderLauncherPod(t, cfg, "{cpu: '"+tc.cpu+"', memory: 1Gi, firmware: UEFI, cpuModel: 'EPYC,+avx2', rootDisk: {persistence: Ephemeral}}")
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
			// The guest grows an Ephemeral root disk's copy; the console's copy grows with its output.
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

// TestTheRootDiskIsTheVMsOwnVolume: a Persistent root disk (the default) is a claim of the VM's
// own that the launcher boots from, imported into once; an Ephemeral one is the container disk's
// copy in an emptyDir, with no claim. Each kind of root disk is the only one the pod mounts.
func TestTheRootDiskIsTheVMsOwnVolume(t *testing.T) {
	for _, tc := range []struct {
		name, spec     string
		claim, envSize string // the root claim's size and VM_ROOT_DISK_SIZE; empty: none
		volume, other  string // the launcher's root volume, and the other kind's
		initDir        string // the init container's mount
	}{
		{name: "default", spec: "{}", claim: "10Gi", envSize: "10Gi", volume: "root-disk", other: "boot-disk", initDir: "/root-disk"},
		{name: "persistent, sized", spec: "{rootDisk: {size: 30Gi, storageClassName: fast}}", claim: "30Gi", envSize: "30Gi", volume: "root-disk", other: "boot-disk", initDir: "/root-disk"},
		{name: "ephemeral", spec: "{rootDisk: {persistence: Ephemeral, size: 30Gi}}", volume: "boot-disk", other: "root-disk", initDir: "/boot-disk"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lc := VirtualMachineLifecycle{VMConfig: DefaultVMConfig()}
			claims := map[string]string{}
			for _, o := range renderCR(t, "virtualmachine", lc, "VirtualMachine", tc.spec) {
				if o.GetKind() == "PersistentVolumeClaim" {
					size, _, _ := unstructured.NestedString(o.Object, "spec", "resources", "requests", "storage")
					claims[o.GetName()] = size
				}
			}
			wantClaims := 1
			if tc.claim != "" {
				wantClaims = 2
			}
			if claims["r-disk"] != "10Gi" || claims["r-root"] != tc.claim || len(claims) != wantClaims {
				t.Errorf("claims %v, want r-disk of 10Gi and a root claim of %q", claims, tc.claim)
			}
			pod := renderLauncherPod(t, lc.VMConfig, tc.spec)
			if got := envValue(pod.Spec.Containers[0], "VM_ROOT_DISK_SIZE"); got != tc.envSize {
				t.Errorf("VM_ROOT_DISK_SIZE %q, want %q", got, tc.envSize)
			}
			var mounts []string
			for _, m := range pod.Spec.Containers[0].VolumeMounts {
				mounts = append(mounts, m.Name)
			}
			for _, v := range pod.Spec.Volumes {
				mounts = append(mounts, v.Name)
				if v.Name == "root-disk" && (v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != "r-root") {
					t.Errorf("volume root-disk %+v, want the claim r-root", v.VolumeSource)
				}
			}
			if got := strings.Count(strings.Join(mounts, " "), tc.volume); got != 2 || slices.Contains(mounts, tc.other) {
				t.Errorf("mounts and volumes %v, want %s alone as the root disk", mounts, tc.volume)
			}
			init := pod.Spec.InitContainers[1]
			if len(init.VolumeMounts) != 2 || init.VolumeMounts[1].MountPath != tc.initDir || !strings.Contains(init.Command[len(init.Command)-1], tc.initDir+"/") {
				t.Errorf("init container %s mounts %v and runs %q, want it to copy into %s", init.Name, init.VolumeMounts, init.Command, tc.initDir)
			}
		})
	}
}

// TestAKubeVirtRootDiskIsADataVolume: KubeVirt's backend imports a Persistent root disk with a
// DataVolume of the VM's own (CDI), and boots an Ephemeral one from the containerDisk.
func TestAKubeVirtRootDiskIsADataVolume(t *testing.T) {
	for _, tc := range []struct {
		spec, want string
	}{
		{spec: "{backend: kubevirt, image: 'disks/debian:13', rootDisk: {size: 20Gi}}", want: "dataVolume"},
		{spec: "{backend: kubevirt, image: 'disks/debian:13', rootDisk: {persistence: Ephemeral}}", want: "containerDisk"},
	} {
		var kv *unstructured.Unstructured
		for _, o := range renderCR(t, "virtualmachine", VirtualMachineLifecycle{VMConfig: DefaultVMConfig()}, "VirtualMachine", tc.spec) {
			if o.GetKind() == "VirtualMachine" {
				kv = o
			}
		}
		if kv == nil {
			t.Fatalf("%s: no KubeVirt VirtualMachine", tc.spec)
		}
		volumes, _, _ := unstructured.NestedSlice(kv.Object, "spec", "template", "spec", "volumes")
		root, _ := volumes[0].(map[string]any)
		templates, _, _ := unstructured.NestedSlice(kv.Object, "spec", "dataVolumeTemplates")
		if _, ok := root[tc.want]; !ok || root["name"] != "root" {
			t.Errorf("%s: root volume %v, want a %s", tc.spec, root, tc.want)
		}
		if tc.want != "dataVolume" {
			if len(templates) != 0 {
				t.Errorf("%s: data volume templates %v, want none", tc.spec, templates)
			}
			continue
		}
		dv, _ := templates[0].(map[string]any)
		url, _, _ := unstructured.NestedString(dv, "spec", "source", "registry", "url")
		size, _, _ := unstructured.NestedString(dv, "spec", "storage", "resources", "requests", "storage")
		name, _, _ := unstructured.NestedString(dv, "metadata", "name")
		if len(templates) != 1 || url != "docker://disks/debian:13" || size != "20Gi" || name != "r-root" || root["dataVolume"].(map[string]any)["name"] != "r-root" {
			t.Errorf("%s: data volume templates %v, want r-root of 20Gi from the image", tc.spec, templates)
		}
	}
}

// TestAHibernatingLauncherSavesItsGuest: stopAction Hibernate has the launcher save the guest's
// state at SIGTERM (VM_HIBERNATE=1); PowerOff, the default, does not, and neither does a spec
// whose root disk is Ephemeral (the CRD refuses it) or KubeVirt's.
func TestAHibernatingLauncherSavesItsGuest(t *testing.T) {
	for _, tc := range []struct {
		spec, want string
	}{
		{spec: "{}", want: ""},
		{spec: "{stopAction: PowerOff}", want: ""},
		{spec: "{stopAction: Hibernate}", want: "1"},
		{spec: "{stopAction: Hibernate, rootDisk: {persistence: Ephemeral}}", want: ""},
	} {
		pod := renderLauncherPod(t, DefaultVMConfig(), tc.spec)
		if got := envValue(pod.Spec.Containers[0], "VM_HIBERNATE"); got != tc.want {
			t.Errorf("%s: VM_HIBERNATE %q, want %q", tc.spec, got, tc.want)
		}
	}
	for _, o := range renderCR(t, "virtualmachine", VirtualMachineLifecycle{VMConfig: DefaultVMConfig()}, "VirtualMachine", "{stopAction: Hibernate, backend: kubevirt}") {
		if strings.Contains(fmt.Sprint(o.Object), "VM_HIBERNATE") {
			t.Errorf("KubeVirt's %s %s asks to hibernate", o.GetKind(), o.GetName())
		}
	}
}
