package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/test/infra/devwebhook"
)

func vmPhase(vm *infrav1alpha1.VirtualMachine, want infrav1alpha1.VirtualMachinePhase) func(context.Context) error {
	return func(ctx context.Context) error {
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(vm), vm); err != nil {
			return err
		}
		if vm.Status.Phase != want {
			return fmt.Errorf("phase %q (%s), want %s", vm.Status.Phase, vm.Status.Message, want)
		}
		return nil
	}
}

func setRunStrategy(t *testing.T, vm *infrav1alpha1.VirtualMachine, rs infrav1alpha1.RunStrategy) {
	t.Helper()
	patch := fmt.Appendf(nil, `{"spec":{"runStrategy":%q}}`, rs)
	if err := k8sClient.Patch(context.Background(), vm, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
}

// TestVirtualMachineRunStrategies: through the webhooks the operator serves on 127.0.0.1, as
// under make run: Always runs the VM (node and IP reported); Halted stops it and keeps its
// disks (data and the Persistent root disk); Always runs it again on the same disks; delete
// tears everything down, and with Retain leaves the disks, owned by no one.
func TestVirtualMachineRunStrategies(t *testing.T) {
	ctx := context.Background()
	ns := "vm-e2e"
	if err := k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	for _, policy := range []infrav1alpha1.ReclaimPolicy{infrav1alpha1.ReclaimDelete, infrav1alpha1.ReclaimRetain} {
		t.Run(string(policy), func(t *testing.T) {
			vm := &infrav1alpha1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "vm-" + strings.ToLower(string(policy))},
				Spec: infrav1alpha1.VirtualMachineSpec{CPU: ptr.To(intstr.FromString("1")), Disk: infrav1alpha1.VMDisk{ReclaimPolicy: policy}}}
			runStrategies(t, vm)
		})
	}
}

func runStrategies(t *testing.T, vm *infrav1alpha1.VirtualMachine) {
	ctx := context.Background()
	if err := k8sClient.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	if vm.Spec.Image == "" || vm.Spec.RunStrategy != infrav1alpha1.RunAlways {
		t.Fatalf("the webhook did not default the VM: %+v", vm.Spec)
	}
	waitFor(t, time.Minute, "Running", vmPhase(vm, infrav1alpha1.VMRunning))
	if vm.Status.NodeName == "" || vm.Status.IP == "" || vm.Status.Status != "Running" || vm.Status.Backend != infrav1alpha1.BackendPod {
		t.Errorf("running status %+v: want node, IP, the tutorial's status field and the pod backend", vm.Status)
	}
	disks := vmDisks(t, vm)
	setRunStrategy(t, vm, infrav1alpha1.RunHalted)
	waitFor(t, time.Minute, "Stopped", vmPhase(vm, infrav1alpha1.VMStopped))
	if !strings.Contains(vm.Status.Message, "the root and data disks are kept") {
		t.Errorf("halted: %q, want it to say that both disks are kept", vm.Status.Message)
	}
	launcher := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: vm.Namespace, Name: vm.Name + "-launcher"}}
	waitFor(t, time.Minute, "the launcher pod gone", func(ctx context.Context) error { return absent(ctx, launcher) })
	sameDisks(t, disks)
	setRunStrategy(t, vm, infrav1alpha1.RunAlways)
	waitFor(t, time.Minute, "Running again", vmPhase(vm, infrav1alpha1.VMRunning))
	sameDisks(t, disks)

	if err := k8sClient.Delete(ctx, vm); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Minute, "the VM gone", func(ctx context.Context) error { return absent(ctx, vm) })
	for _, obj := range []client.Object{launcher,
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: vm.Namespace, Name: vm.Name + "-cloudinit"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: vm.Namespace, Name: vm.Name}},
	} {
		if err := absent(ctx, obj); err != nil {
			t.Errorf("left after delete: %v", err)
		}
	}
	if vm.Spec.Disk.ReclaimPolicy == infrav1alpha1.ReclaimRetain {
		for key := range disks {
			assertVolumeKept(t, key.Namespace, key.Name)
		}
		adoptsDisks(t, vm, disks)
		return
	}
	for key := range disks {
		waitFor(t, time.Minute, key.Name+" deleted", func(ctx context.Context) error {
			return absent(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}})
		})
	}
}

// vmDisks are the claims of a VM with a Persistent root disk, its data disk's and its root
// disk's, by their UIDs.
func vmDisks(t *testing.T, vm *infrav1alpha1.VirtualMachine) map[client.ObjectKey]types.UID {
	t.Helper()
	disks := map[client.ObjectKey]types.UID{}
	for _, suffix := range []string{"-disk", "-root"} {
		disk := &corev1.PersistentVolumeClaim{}
		key := client.ObjectKey{Namespace: vm.Namespace, Name: vm.Name + suffix}
		if err := k8sClient.Get(context.Background(), key, disk); err != nil {
			t.Fatal(err)
		}
		disks[key] = disk.UID
	}
	return disks
}

// adoptsDisks: a new VM of the same name runs on the disks its predecessor kept, and owns them.
func adoptsDisks(t *testing.T, old *infrav1alpha1.VirtualMachine, disks map[client.ObjectKey]types.UID) {
	t.Helper()
	vm := &infrav1alpha1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: old.Namespace, Name: old.Name}}
	if err := k8sClient.Create(context.Background(), vm); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "Running on the kept disks", vmPhase(vm, infrav1alpha1.VMRunning))
	sameDisks(t, disks)
	for key := range disks {
		disk := &corev1.PersistentVolumeClaim{}
		if err := k8sClient.Get(context.Background(), key, disk); err != nil || len(disk.OwnerReferences) != 1 || disk.OwnerReferences[0].UID != vm.UID {
			t.Errorf("the kept disk %s's owners %+v (%v), want the new VM %s", key.Name, disk.OwnerReferences, err, vm.UID)
		}
	}
	if err := k8sClient.Delete(context.Background(), vm); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Minute, "the new VM gone", func(ctx context.Context) error { return absent(ctx, vm) })
}

func sameDisks(t *testing.T, disks map[client.ObjectKey]types.UID) {
	t.Helper()
	for key, uid := range disks {
		disk := &corev1.PersistentVolumeClaim{}
		if err := k8sClient.Get(context.Background(), key, disk); err != nil || disk.UID != uid || disk.DeletionTimestamp != nil {
			t.Fatalf("%s is not the disk the VM had (%v): uid %s, want %s", key.Name, err, disk.UID, uid)
		}
	}
}

// TestWebhookServesARotatedCertificate: a new certificate written into the cert dir (as
// cert-manager or OLM rotate it) is served without restarting the operator, and the API
// server, trusting the same CA, keeps admitting through it.
func TestWebhookServesARotatedCertificate(t *testing.T) {
	before := servedSerial(t)
	files, err := devwebhook.Issue(webhookDir, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	want := certSerial(t, files.Cert)
	if want == before {
		t.Fatal("the new certificate has the old serial")
	}
	waitFor(t, time.Minute, "the new certificate served", func(context.Context) error {
		if got := servedSerial(t); got != want {
			return fmt.Errorf("serving serial %s, want %s", got, want)
		}
		return nil
	})
	vm := &infrav1alpha1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "after-rotation",
		Annotations: map[string]string{infrav1alpha1.PauseAnnotation: "true"}}}
	if err := k8sClient.Create(context.Background(), vm); err != nil || vm.Spec.Image == "" {
		t.Fatalf("admission after the rotation: %v (image %q)", err, vm.Spec.Image)
	}
	_ = k8sClient.Delete(context.Background(), vm)
}

func servedSerial(t *testing.T) string {
	t.Helper()
	conn, err := tls.Dial("tcp", webhookAddr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // only reads the certificate
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

func certSerial(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(data)
	if block == nil {
		t.Fatalf("%s is not PEM", path)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c.SerialNumber.String()
}
