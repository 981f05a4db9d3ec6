package realnode

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
)

// vmBootTimeout bounds a boot of the default disk in software emulation on a busy 2-core node.
const vmBootTimeout = 10 * time.Minute

// checkVirtualMachine boots the default disk (our Debian guest, in software emulation: this
// machine's KVM is nested and cannot boot guests), logs in over SSH through the VM's Service
// with the user's key, halts it and boots it again with its data disk intact.
func checkVirtualMachine(t *testing.T) {
	ctx := context.Background()
	key, pub := sshKey(t)
	vm := &infrav1alpha1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: "real-vm", Namespace: testNS},
		Spec: infrav1alpha1.VirtualMachineSpec{
			Memory:    ptr.To(resource.MustParse("1Gi")),
			Disk:      infrav1alpha1.VMDisk{Size: ptr.To(resource.MustParse("1Gi"))},
			CloudInit: &infrav1alpha1.VMCloudInit{SSHAuthorizedKeys: []string{pub}},
		},
	}
	if err := k8sClient.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), vm) })
	start := time.Now()
	waitVMRunning(t, vm)
	out := vmSSH(t, vm, key, "hostname; echo cloudspace-mark | sudo -n dd of=/dev/vdb bs=512 count=1 conv=sync status=none && sync && echo written")
	t.Logf("VM create to an SSH login: %s", time.Since(start).Round(time.Second))
	if out != vm.Name+"\nwritten\n" {
		t.Fatalf("over SSH: %q, want the hostname %s and the mark written to the data disk", out, vm.Name)
	}
	if vm.Status.Restarts != 0 {
		t.Errorf("the launcher restarted %d times: %s", vm.Status.Restarts, vm.Status.Message)
	}

	claim := haltVM(t, vm)
	setRunStrategy(t, vm, infrav1alpha1.RunAlways)
	waitVMRunning(t, vm)
	if got := vmSSH(t, vm, key, "sudo -n head -c 15 /dev/vdb"); got != "cloudspace-mark" {
		t.Errorf("after Halted and a new boot the data disk starts with %q, want the mark", got)
	}
	var pvc corev1.PersistentVolumeClaim
	if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(claim), &pvc); err != nil || pvc.UID != claim.UID {
		t.Errorf("the data disk's claim after the restart: %v (uid %s, want %s)", err, pvc.UID, claim.UID)
	}
}

// checkPortSysctl: the node, like containerd 1.x, lets a non-root pod bind port 22 only with
// the sysctl the launcher pod sets, so the VM test above proves the chart, not the runtime's
// defaults (containerd 2 sets the sysctl itself unless told not to).
func checkPortSysctl(t *testing.T) {
	for _, tc := range []struct {
		name    string
		sysctls []corev1.Sysctl
		refused bool
	}{
		{"bind22-plain", nil, true},
		{"bind22-sysctl", []corev1.Sysctl{{Name: "net.ipv4.ip_unprivileged_port_start", Value: "0"}}, false},
	} {
		logs := runToEnd(t, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: tc.name, Namespace: testNS},
			Spec: corev1.PodSpec{
				RestartPolicy:   corev1.RestartPolicyNever,
				SecurityContext: &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](107), RunAsNonRoot: ptr.To(true), Sysctls: tc.sysctls},
				Containers: []corev1.Container{{Name: "bind", Image: env["REGISTRY"] + "/busybox:1.35",
					Command: []string{"/bin/busybox", "sh", "-c", "/bin/busybox timeout 2 /bin/busybox nc -l -p 22; echo status=$?"}}},
			},
		})
		if refused := strings.Contains(logs, "Permission denied"); refused != tc.refused {
			t.Errorf("%s: binding port 22 as uid 107 printed %q; want refused=%v", tc.name, logs, tc.refused)
		}
	}
}

// runToEnd runs pod until it ends and returns its logs.
func runToEnd(t *testing.T, pod *corev1.Pod) string {
	t.Helper()
	ctx := context.Background()
	if err := k8sClient.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), pod) })
	waitFor(t, 2*time.Minute, "pod "+pod.Name+" ended", func(ctx context.Context) error {
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return err
		}
		if pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
			return fmt.Errorf("phase %s", pod.Status.Phase)
		}
		return nil
	})
	logs, err := clientset.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return string(logs)
}

// sshKey makes an ed25519 key pair with ssh-keygen and returns the private key's file and the
// public key's line.
func sshKey(t *testing.T) (string, string) {
	t.Helper()
	key := filepath.Join(t.TempDir(), "id_ed25519")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "real-test", "-f", key).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v\n%s", err, out)
	}
	pub, err := os.ReadFile(key + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	return key, strings.TrimSpace(string(pub))
}

// waitVMRunning waits for phase Running and checks, the moment it is seen, that the guest's
// sshd answers: Running must mean the guest is up, not that QEMU started.
func waitVMRunning(t *testing.T, vm *infrav1alpha1.VirtualMachine) {
	t.Helper()
	waitFor(t, vmBootTimeout, "VM "+vm.Name+" Running", func(ctx context.Context) error {
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(vm), vm); err != nil {
			return err
		}
		if vm.Status.Phase == infrav1alpha1.VMFailed {
			t.Fatalf("VM failed: %s", vm.Status.Message)
		}
		if vm.Status.Phase != infrav1alpha1.VMRunning {
			return fmt.Errorf("phase %s: %s", vm.Status.Phase, vm.Status.Message)
		}
		return nil
	})
	banner, err := sshBanner(vm.Status.IP)
	if err != nil {
		t.Fatalf("the VM is Running but its guest's sshd does not answer: %v", err)
	}
	t.Logf("Running, and the guest answers: %s (%s)", banner, vm.Status.Message)
}

// sshBanner reads the first line the guest's port 22 sends, from inside the node.
func sshBanner(ip string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := node.DialContext(ctx, "tcp", net.JoinHostPort(ip, "22"))
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(conn).ReadString('\n')
	if !strings.HasPrefix(line, "SSH-") {
		return "", fmt.Errorf("read %q: %v", line, err)
	}
	return strings.TrimSpace(line), nil
}

// vmSSH runs a command in the guest as its default user, with the key, through a
// port-forward to the VM's Service: how a user outside the cluster logs in.
func vmSSH(t *testing.T, vm *infrav1alpha1.VirtualMachine, key, command string) string {
	t.Helper()
	port := portForward(t, vm.Namespace, "svc/"+vm.Name, 22)
	cmd := exec.Command("ssh", "-i", key, "-p", port, "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
		"-o", "BatchMode=yes", "-o", "ConnectTimeout=20", "-o", "LogLevel=ERROR", "debian@127.0.0.1", command)
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("ssh %q: %v\n%s%s", command, err, out, stderr)
	}
	return string(out)
}

// haltVM sets runStrategy Halted and checks that the guest powers off (the pod ends) within
// the shutdown grace period, which the kubelet would otherwise end with a kill, and that the
// data disk's claim is kept. It returns the claim.
func haltVM(t *testing.T, vm *infrav1alpha1.VirtualMachine) *corev1.PersistentVolumeClaim {
	t.Helper()
	ctx := context.Background()
	claims := &corev1.PersistentVolumeClaimList{}
	if err := k8sClient.List(ctx, claims, client.InNamespace(vm.Namespace)); err != nil {
		t.Fatal(err)
	}
	var claim *corev1.PersistentVolumeClaim
	for i := range claims.Items {
		if o := metav1.GetControllerOf(&claims.Items[i]); o != nil && o.UID == vm.UID {
			claim = &claims.Items[i]
		}
	}
	if claim == nil {
		t.Fatalf("the VM has no claim of its own among %d", len(claims.Items))
	}
	setRunStrategy(t, vm, infrav1alpha1.RunHalted)
	start := time.Now()
	waitFor(t, 2*time.Minute, "VM "+vm.Name+" Stopped and its launcher pod gone", func(ctx context.Context) error {
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(vm), vm); err != nil {
			return err
		}
		err := k8sClient.Get(ctx, client.ObjectKey{Namespace: vm.Namespace, Name: vm.Name + "-launcher"}, &corev1.Pod{})
		if vm.Status.Phase != infrav1alpha1.VMStopped || !apierrors.IsNotFound(err) {
			return fmt.Errorf("phase %s (%s), pod: %v", vm.Status.Phase, vm.Status.Message, err)
		}
		return nil
	})
	if took, grace := time.Since(start), vm.Spec.ShutdownGracePeriod.Duration; took >= grace {
		t.Errorf("halting took %s, not within the grace period %s: the guest was killed, not powered off", took, grace)
	}
	return claim
}

func setRunStrategy(t *testing.T, vm *infrav1alpha1.VirtualMachine, s infrav1alpha1.RunStrategy) {
	t.Helper()
	patch := client.MergeFrom(vm.DeepCopy())
	vm.Spec.RunStrategy = s
	if err := k8sClient.Patch(context.Background(), vm, patch); err != nil {
		t.Fatal(err)
	}
}
