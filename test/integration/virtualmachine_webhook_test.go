package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/controllers"
	"github.com/cloudspace-dev/cloudspace-operator/test/framework"
)

func newVM(ns, name string, spec map[string]any) *unstructured.Unstructured {
	vm := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	vm.SetGroupVersionKind(infrav1alpha1.GroupVersion.WithKind("VirtualMachine"))
	vm.SetNamespace(ns)
	vm.SetName(name)
	return vm
}

// TestVirtualMachineTutorialSampleIsDefaulted: the kubebuilder VirtualMachine tutorial's sample, as written, is accepted through
// the real API server and its webhooks, and comes back with every default.
func TestVirtualMachineTutorialSampleIsDefaulted(t *testing.T) {
	ns := newNamespace(t)
	data, err := os.ReadFile(filepath.Join(framework.RepoRoot(), "config", "samples", "infra_v1alpha1_virtualmachine.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	vm := &infrav1alpha1.VirtualMachine{}
	if err := yaml.UnmarshalStrict(data, vm); err != nil {
		t.Fatal(err)
	}
	vm.Namespace = ns
	// The operator is running: keep it from starting the sample, which this test only admits.
	vm.Annotations = map[string]string{infrav1alpha1.PauseAnnotation: "true"}
	if err := k8sClient.Create(context.Background(), vm); err != nil {
		t.Fatalf("the seed's sample was refused: %v", err)
	}
	s := vm.Spec
	for _, c := range []struct{ field, got, want string }{
		{"cpu", s.CPU.String(), "1"},
		{"memory", s.Memory.String(), "2G"},
		{"image", s.Image, vmConfig.DefaultImage},
		{"runStrategy", string(s.RunStrategy), "Always"},
		{"backend", string(s.Backend), "auto"},
		{"rootDisk.persistence", string(s.RootDisk.Persistence), "Persistent"},
		{"rootDisk.size", s.RootDisk.Size.String(), "10Gi"},
		{"disk.size", s.Disk.Size.String(), "10Gi"},
		{"disk.reclaimPolicy", string(s.Disk.ReclaimPolicy), "Delete"},
		{"ports", fmt.Sprint(s.Ports), "[{ssh 22 TCP}]"},
		{"shutdownGracePeriod", s.ShutdownGracePeriod.Duration.String(), "1m0s"},
		{"stopAction", string(s.StopAction), "PowerOff"},
	} {
		if c.got != c.want {
			t.Errorf("spec.%s = %q, want %q", c.field, c.got, c.want)
		}
	}
}

// vmCase is one invalid VirtualMachine spec, the field path the refusal must name and a part
// of its message.
type vmCase struct {
	name string
	spec map[string]any
	path string
	msg  string
}

var invalidVMs = []vmCase{
	{"cpu zero", map[string]any{"cpu": "0"}, "spec.cpu", "positive whole number"},
	{"cpu zero as a number", map[string]any{"cpu": int64(0)}, "spec.cpu", "positive whole number"},
	{"cpu negative", map[string]any{"cpu": "-1"}, "spec.cpu", "positive whole number"},
	{"cpu fraction", map[string]any{"cpu": "1.5"}, "spec.cpu", "positive whole number"},
	{"cpu over the CRD's ceiling", map[string]any{"cpu": int64(1000)}, "spec.cpu", "at most 256"},
	{"cpu over the operator's limit", map[string]any{"cpu": "12"}, "spec.cpu", "exceeds the most a VM may have here (8)"},
	{"memory under 128Mi", map[string]any{"memory": "64Mi"}, "spec.memory", "at least 128Mi"},
	{"memory negative", map[string]any{"memory": "-2Gi"}, "spec.memory", "at least 128Mi"},
	{"memory over the operator's limit", map[string]any{"memory": "32Gi"}, "spec.memory", "exceeds the most a VM may have here (16Gi)"},
	{"image with a space", map[string]any{"image": "fedora 40"}, "spec.image", "should match"},
	{"image not a reference", map[string]any{"image": "Fedora:40"}, "spec.image", "not an image reference"},
	{"image with two tags", map[string]any{"image": "fedora:40:41"}, "spec.image", "not an image reference"},
	{"run strategy unknown", map[string]any{"runStrategy": "Sometimes"}, "spec.runStrategy", "Unsupported value"},
	{"backend unknown", map[string]any{"backend": "xen"}, "spec.backend", "Unsupported value"},
	{"backend kubevirt without KubeVirt", map[string]any{"backend": "kubevirt"}, "spec.backend", "does not serve kubevirt.io/v1"},
	{"disk size zero", map[string]any{"disk": map[string]any{"size": "0"}}, "spec.disk.size", "positive quantity"},
	{"disk over the operator's limit", map[string]any{"disk": map[string]any{"size": "1Ti"}}, "spec.disk.size", "exceeds the most a VM may have here (100Gi)"},
	{"root disk persistence unknown", map[string]any{"rootDisk": map[string]any{"persistence": "Sometimes"}}, "spec.rootDisk.persistence", "Unsupported value"},
	{"root disk size zero", map[string]any{"rootDisk": map[string]any{"size": "0"}}, "spec.rootDisk.size", "positive quantity"},
	{"root disk over the operator's limit", map[string]any{"rootDisk": map[string]any{"size": "101Gi"}}, "spec.rootDisk.size", "exceeds the most a VM may have here (100Gi)"},
	{"stop action unknown", map[string]any{"stopAction": "Suspend"}, "spec.stopAction", "Unsupported value"},
	{"hibernate with an Ephemeral root disk", map[string]any{"stopAction": "Hibernate", "rootDisk": map[string]any{"persistence": "Ephemeral"}}, "spec.stopAction", "needs a Persistent root disk"},
	{"hibernate on KubeVirt", map[string]any{"stopAction": "Hibernate", "backend": "kubevirt"}, "spec.stopAction", "needs the pod backend"},
	{"hibernate with no room for the state", map[string]any{"stopAction": "Hibernate", "memory": "4Gi", "rootDisk": map[string]any{"size": "4Gi"}}, "spec.rootDisk.size", "larger than spec.memory"},
	{"reclaim policy unknown", map[string]any{"disk": map[string]any{"reclaimPolicy": "Keep"}}, "spec.disk.reclaimPolicy", "Unsupported value"},
	{"port zero", map[string]any{"ports": []any{map[string]any{"name": "ssh", "port": int64(0)}}}, "spec.ports[0].port", "greater than or equal to 1"},
	{"port name twice", map[string]any{"ports": []any{map[string]any{"name": "ssh", "port": int64(22)}, map[string]any{"name": "ssh", "port": int64(2222)}}}, "spec.ports[1]", "Duplicate value"},
	{"not an SSH key", map[string]any{"cloudInit": map[string]any{"sshAuthorizedKeys": []any{"hunter2"}}}, "spec.cloudInit.sshAuthorizedKeys", "OpenSSH public key"},
	{"keys with a script", map[string]any{"cloudInit": map[string]any{"userData": "#!/bin/sh\necho hi\n", "sshAuthorizedKeys": []any{"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB a@b"}}}, "spec.cloudInit.sshAuthorizedKeys", "only to a #cloud-config"},
}

// TestVirtualMachineInvalidObjectsAreRejected: each invalid VM is refused by the API server
// (schema, CEL or the validating webhook), naming its field path and saying why.
func TestVirtualMachineInvalidObjectsAreRejected(t *testing.T) {
	ns := newNamespace(t)
	for i, tc := range invalidVMs {
		t.Run(tc.name, func(t *testing.T) {
			err := k8sClient.Create(context.Background(), newVM(ns, fmt.Sprintf("bad-%d", i), tc.spec))
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.path) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("got %v; want Invalid naming %s: %q", err, tc.path, tc.msg)
			}
		})
	}
}

// TestVirtualMachineUpdatesKeepTheRules: the backend never changes, the disks never shrink, a
// Persistent root disk never becomes Ephemeral (its volume would go), and a limit is checked on
// the field that changes, so other edits stay possible.
func TestVirtualMachineUpdatesKeepTheRules(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	vm := newVM(ns, "upd", map[string]any{"backend": "pod", "disk": map[string]any{"size": "20Gi"}, "runStrategy": "Halted"})
	vm.SetAnnotations(map[string]string{infrav1alpha1.PauseAnnotation: "true"})
	if err := k8sClient.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, patch, path, msg string
	}{
		{"backend changes", `{"spec":{"backend":"auto"}}`, "spec.backend", "immutable"},
		{"disk shrinks", `{"spec":{"disk":{"size":"10Gi"}}}`, "spec.disk.size", "never shrinks"},
		{"root disk shrinks", `{"spec":{"rootDisk":{"size":"5Gi"}}}`, "spec.rootDisk.size", "never shrinks"},
		{"root disk made Ephemeral", `{"spec":{"rootDisk":{"persistence":"Ephemeral"}}}`, "spec.rootDisk", "cannot become Ephemeral"},
		{"cpu over the limit", `{"spec":{"cpu":"9"}}`, "spec.cpu", "exceeds"},
		{"hibernate with more memory than the root disk", `{"spec":{"stopAction":"Hibernate","memory":"16Gi"}}`, "spec.rootDisk.size", "larger than spec.memory"},
	} {
		err := k8sClient.Patch(ctx, vm.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(tc.patch)))
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.path) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: got %v; want Invalid naming %s: %q", tc.name, err, tc.path, tc.msg)
		}
	}
	for _, patch := range []string{`{"spec":{"disk":{"size":"30Gi"}}}`, `{"spec":{"rootDisk":{"size":"20Gi"}}}`, `{"spec":{"cpu":2,"runStrategy":"Always"}}`,
		`{"spec":{"stopAction":"Hibernate"}}`, `{"spec":{"stopAction":"PowerOff"}}`} {
		if err := k8sClient.Patch(ctx, vm.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
			t.Errorf("%s refused: %v", patch, err)
		}
	}
	// An Ephemeral root disk may become Persistent: the next start imports it.
	eph := newVM(ns, "eph", map[string]any{"backend": "pod", "rootDisk": map[string]any{"persistence": "Ephemeral"}, "runStrategy": "Halted"})
	eph.SetAnnotations(map[string]string{infrav1alpha1.PauseAnnotation: "true"})
	if err := k8sClient.Create(ctx, eph); err != nil {
		t.Fatal(err)
	}
	if err := k8sClient.Patch(ctx, eph, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"rootDisk":{"persistence":"Persistent"}}}`))); err != nil {
		t.Errorf("an Ephemeral root disk made Persistent: %v", err)
	}
}

// TestVirtualMachineUndecodableValuesNameTheField: a value the VM's Go type cannot hold (a
// quantity or a duration that is not one, a fraction where a whole number belongs) reaches the
// mutating webhook before the CRD's schema is checked, and its decoder refused it without
// saying where ("quantities must match the regular expression ..."). The refusal names each
// such field as every other refusal does.
func TestVirtualMachineUndecodableValuesNameTheField(t *testing.T) {
	ns := newNamespace(t)
	for i, tc := range []struct {
		name string
		spec map[string]any
		want []string
	}{
		{"memory not a quantity", map[string]any{"memory": "abc"},
			[]string{`spec.memory: Invalid value: "abc": quantities must match the regular expression`}},
		{"disk size not a quantity", map[string]any{"disk": map[string]any{"size": "big"}},
			[]string{`spec.disk.size: Invalid value: "big": quantities must match the regular expression`}},
		{"grace period not a duration", map[string]any{"shutdownGracePeriod": "soon"},
			[]string{`spec.shutdownGracePeriod: Invalid value: "soon": time: invalid duration`}},
		{"cpu a fraction", map[string]any{"cpu": 1.5}, []string{`spec.cpu: Invalid value: 1.5: `}},
		{"two fields at once", map[string]any{"memory": "abc", "disk": map[string]any{"size": "big"}},
			[]string{`spec.memory: Invalid value: "abc": `, `spec.disk.size: Invalid value: "big": `}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := k8sClient.Create(context.Background(), newVM(ns, fmt.Sprintf("undecodable-%d", i), tc.spec))
			if !apierrors.IsInvalid(err) {
				t.Fatalf("got %v; want Invalid", err)
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("got %v; want it to say %q", err, want)
				}
			}
		})
	}
}

// TestVirtualMachineWebhookBoundsTheGracePeriod: the webhook refuses a shutdown grace period
// outside 0s to 1h on its own, naming the field, so that a VM admitted while the CRD's rule was
// missing (an older CRD) still cannot hold a deleted VM, and its node, for ten years.
func TestVirtualMachineWebhookBoundsTheGracePeriod(t *testing.T) {
	wh := controllers.VirtualMachineWebhook{VMConfig: vmConfig, KubeVirtServed: func(context.Context) (bool, error) { return false, nil }}
	for _, tc := range []struct {
		period string
		valid  bool
	}{{"87600h", false}, {"-10s", false}, {"1h0m1s", false}, {"1h", true}, {"0s", true}, {"60s", true}} {
		d, err := time.ParseDuration(tc.period)
		if err != nil {
			t.Fatal(err)
		}
		vm := &infrav1alpha1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "grace", Namespace: "default"}}
		vmConfig.Default(vm)
		vm.Spec.ShutdownGracePeriod = &metav1.Duration{Duration: d}
		_, err = wh.ValidateCreate(context.Background(), vm)
		switch {
		case tc.valid && err != nil:
			t.Errorf("%s: refused (%v), want admitted", tc.period, err)
		case !tc.valid && (!apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.shutdownGracePeriod") || !strings.Contains(err.Error(), "1h")):
			t.Errorf("%s: got %v, want Invalid naming spec.shutdownGracePeriod and its bound", tc.period, err)
		}
	}
}
