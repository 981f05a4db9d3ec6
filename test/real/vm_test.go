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
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/test/infra/realcluster"
)

// vmBootTimeout bounds a boot of the default disk in software emulation on a busy 2-core node.
const vmBootTimeout = 10 * time.Minute

// vmIdleTimeout is the real VM's idle timeout: the shortest a spec may ask for. The operator's
// warning is then half of it, and it reads the launcher's activity every activityReadings.
const vmIdleTimeout = time.Minute

// realVM is the suite's VM: created on the node the node checks lose and drain, booted and
// used by the VM lane, lost and drained with that node, and halted by the drain check.
type realVM struct {
	*infrav1alpha1.VirtualMachine
	// key is the user's private key file.
	key string
	// booted is closed once the VM lane's first boot is over (or the lane is): other lanes
	// wait for it before booting guests of their own, since two guests booting at once on two
	// cores each take twice as long.
	booted   chan struct{}
	bootOver func()
	// process is the guest's process that must outlive its hibernation.
	process guestProcess
}

// createRealVM creates the suite's VM with its launcher pod scheduled on node (the other nodes
// cordoned until it is), where its volume then holds it.
func createRealVM(t *testing.T, node string) *realVM {
	t.Helper()
	key, pub := sshKey(t)
	vm := &infrav1alpha1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: "real-vm", Namespace: testNS},
		Spec: infrav1alpha1.VirtualMachineSpec{
			Memory:      ptr.To(resource.MustParse("1Gi")),
			Disk:        infrav1alpha1.VMDisk{VMVolume: infrav1alpha1.VMVolume{Size: ptr.To(resource.MustParse("1Gi"))}},
			CloudInit:   &infrav1alpha1.VMCloudInit{SSHAuthorizedKeys: []string{pub}},
			IdleTimeout: &metav1.Duration{Duration: vmIdleTimeout},
			StopAction:  infrav1alpha1.StopHibernate,
		},
	}
	uncordon := cordonAllBut(t, node)
	defer uncordon()
	if err := k8sClient.Create(context.Background(), vm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), vm) })
	waitFor(t, 2*time.Minute, "VM "+vm.Name+"'s launcher scheduled on "+node, func(ctx context.Context) error {
		pod := &corev1.Pod{}
		if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: vm.Namespace, Name: vm.Name + "-launcher"}, pod); err != nil {
			return err
		}
		if pod.Spec.NodeName != node {
			return fmt.Errorf("on %q", pod.Spec.NodeName)
		}
		return nil
	})
	booted := make(chan struct{})
	return &realVM{VirtualMachine: vm, key: key, booted: booted, bootOver: sync.OnceFunc(func() { close(booted) })}
}

// checkVirtualMachine boots the default disk (our Debian guest, in software emulation: this
// machine's KVM is nested and cannot boot guests), logs in over SSH through the VM's Service
// with the user's key, and writes a mark on its data disk and a file in the user's home, on its
// Persistent root disk. With an SSH session open, it runs on
// past its idle timeout, and from inside the guest another tenant's IDE, the API server, the
// workspace API and the metadata address are closed, the outside and DNS open; without its
// NetworkPolicy the guest reaches the API server and the metadata address, and not once the
// operator puts it back. Left alone, it is warned of, then stopped for, being unused: it
// hibernates (stopAction Hibernate), a process started in the guest held in its saved state. It is
// then started again, with its idle timeout raised: the node checks find it running (and its
// mark on its disk) on the node they lose and drain.
func checkVirtualMachine(t *testing.T, rv *realVM) {
	ctx := context.Background()
	vm, key := rv.VirtualMachine, rv.key
	defer rv.bootOver()
	start := vm.CreationTimestamp.Time
	// Another tenant's IDE, for the guest to try, starts while the guest boots.
	ensureNamespace(t, workspaceNS)
	dave := placedWorkspaces(t, "", [2]string{"vm-net-dave", "dave"})[0]
	waitVMRunning(t, vm)
	rv.bootOver()
	out := vmSSH(t, vm, key, "hostname; echo cloudspace-mark | sudo -n dd of=/dev/vdb bs=512 count=1 conv=sync status=none && echo kept > ~/mark && sync && echo written")
	t.Logf("VM create to an SSH login: %s", time.Since(start).Round(time.Second))
	if out != vm.Name+"\nwritten\n" {
		t.Fatalf("over SSH: %q, want the hostname %s and the marks written to the data disk and the home", out, vm.Name)
	}
	if vm.Status.Restarts != 0 {
		t.Errorf("the launcher restarted %d times: %s", vm.Status.Restarts, vm.Status.Message)
	}
	startGuestProcess(t, rv)

	closed, open := guestTargets(t, dave)
	checkVMIdleStop(t, vm, key, func() {
		expect(t, launcherPod(t, vm), guestProbe(t, vm, key, append(closed, open...)), open, closed)
		checkGuestWithoutPolicy(t, vm, key, closed)
	})
	checkHibernated(t, rv)
	patch := client.MergeFrom(vm.DeepCopy())
	vm.Spec.StartRequests++
	vm.Spec.IdleTimeout = &metav1.Duration{Duration: 30 * time.Minute}
	if err := k8sClient.Patch(ctx, vm, patch); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "VM "+vm.Name+" starting again", func(ctx context.Context) error {
		return k8sClient.Get(ctx, client.ObjectKey{Namespace: vm.Namespace, Name: vm.Name + "-launcher"}, &corev1.Pod{})
	})
}

// checkVMRestarted waits until the suite's VM, started again after its idle stop, is Running,
// and finds the mark on its data disk and the file in its home, and its guest resumed: the
// process started before its stop runs on with its memory (checkResumed). Its memory then
// changed, it boots cold (checkMismatchBootsCold); its stopAction set back to PowerOff, it
// resumes once more, a resume Prometheus sees, and powers off from then on (stopHibernating), as
// the node checks expect.
func checkVMRestarted(t *testing.T, rv *realVM, prom prometheusServer) {
	t.Helper()
	claims := []*corev1.PersistentVolumeClaim{vmClaim(t, rv.VirtualMachine, "disk"), vmClaim(t, rv.VirtualMachine, "root")}
	waitVMRunning(t, rv.VirtualMachine)
	if got := vmSSH(t, rv.VirtualMachine, rv.key, "sudo -n head -c 15 /dev/vdb"); got != "cloudspace-mark" {
		t.Errorf("after an idle stop and a new boot the data disk starts with %q, want the mark", got)
	}
	checkHomeKept(t, rv, "an idle stop and a start request")
	for _, claim := range claims {
		if now := vmClaim(t, rv.VirtualMachine, claim.Name[len(rv.Name)+1:]); now.UID != claim.UID {
			t.Errorf("the claim %s after the restart is %s, want %s", claim.Name, now.UID, claim.UID)
		}
	}
	checkMismatchBootsCold(t, rv, checkResumed(t, rv))
	stopHibernating(t, rv, prom)
}

// checkHomeKept reads the file checkVirtualMachine wrote in the guest's home, on its Persistent
// root disk, after what.
func checkHomeKept(t *testing.T, rv *realVM, what string) {
	t.Helper()
	if got := vmSSH(t, rv.VirtualMachine, rv.key, "cat ~/mark"); got != "kept\n" {
		t.Errorf("after %s the file written in the guest's home reads %q, want \"kept\"", what, got)
	}
}

// guestTargets are what a VM's guest tries from inside: another tenant's IDE (pod and
// Service), the API server, the workspace API and the metadata address, closed; the outside,
// open.
func guestTargets(t *testing.T, other *corev1.Pod) (closed, open []target) {
	t.Helper()
	closed = []target{
		{"other-ide-pod", net.JoinHostPort(other.Status.PodIP, "8080")},
		{"other-ide-service", serviceAddr(t, other.Namespace, other.Labels["app.kubernetes.io/instance"])},
		{"api-server", net.JoinHostPort(realcluster.APIServiceIP, "443")},
		{"workspace-api", serviceAddr(t, operatorNS, grpcService)},
		{"metadata", net.JoinHostPort(realcluster.MetadataIP, "80")},
	}
	return closed, []target{{"outside", net.JoinHostPort(realcluster.OutsideIP, "80")}}
}

// guestProbe runs the probes from inside the VM's guest, over SSH: its connections leave
// through its launcher pod (QEMU's user networking), under the VM's NetworkPolicy.
func guestProbe(t *testing.T, vm *infrav1alpha1.VirtualMachine, key string, targets []target) map[string]bool {
	t.Helper()
	// A guest in software emulation on a busy node takes seconds to start a process at all.
	// DNS is a TCP connection to the cluster's DNS Service: the guest's systemd-resolved sends
	// names under .local to multicast DNS, never to a server.
	dns := `bash -c "exec 3<>/dev/tcp/` + realcluster.DNSServiceIP + `/53"`
	script := probeScript(targets, 20, dns)
	return probeAnswers(t, vm.Name+"'s guest", targets, vmSSH(t, vm, key, "bash -c '"+strings.ReplaceAll(script, "'", `'\''`)+"'"))
}

// checkGuestWithoutPolicy pauses the VM and deletes its egress policy: from the guest the API
// server and the metadata address open (the probe can fail), while the other tenant's IDE
// stays closed by its own policy; restored, they close again.
func checkGuestWithoutPolicy(t *testing.T, vm *infrav1alpha1.VirtualMachine, key string, closed []target) {
	t.Helper()
	var opens, stays []target
	for _, tg := range closed {
		switch tg.name {
		case "api-server", "metadata":
			opens = append(opens, tg)
		case "other-ide-pod", "other-ide-service":
			stays = append(stays, tg)
		}
	}
	launcher := launcherPod(t, vm)
	withoutPolicies(t, []client.Object{vm}, []client.ObjectKey{client.ObjectKeyFromObject(vm)}, func() {
		waitFor(t, time.Minute, "the guest reaching the API server and the metadata address without its policy", func(context.Context) error {
			return expectErr(launcher, guestProbe(t, vm, key, append(opens, stays...)), opens, stays)
		})
	})
	waitFor(t, time.Minute, "the restored policy closing them again", func(context.Context) error {
		return expectErr(launcher, guestProbe(t, vm, key, append(opens, stays...)), nil, append(opens, stays...))
	})
}

// launcherPod is the VM's launcher pod.
func launcherPod(t *testing.T, vm *infrav1alpha1.VirtualMachine) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{}
	if err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: vm.Namespace, Name: vm.Name + "-launcher"}, pod); err != nil {
		t.Fatal(err)
	}
	return pod
}

// checkVMIdleStop holds an SSH session open on the running VM through its Service, as a user
// outside the cluster would, past its idle timeout and two readings of its launcher (running
// during meanwhile): the VM must run on, unwarned. Then it ends the session: the VM must be
// warned of its stop (status.idleStopAt), then stopped (Stopped, stoppedReason Idle, the
// launcher pod gone).
func checkVMIdleStop(t *testing.T, vm *infrav1alpha1.VirtualMachine, key string, during func()) {
	t.Helper()
	session := vmSSHCommand(vm, key, portForward(t, vm.Namespace, "svc/"+vm.Name, 22), "sleep 900")
	if err := session.Start(); err != nil {
		t.Fatal(err)
	}
	held := time.Now()
	endSession := func() {
		_ = session.Process.Kill()
		_ = session.Wait()
	}
	t.Cleanup(endSession)
	during()
	for until := held.Add(vmIdleTimeout + 2*activityReadings); time.Now().Before(until); time.Sleep(5 * time.Second) {
		if err := k8sClient.Get(context.Background(), client.ObjectKeyFromObject(vm), vm); err != nil {
			t.Fatal(err)
		}
		if vm.Status.Phase != infrav1alpha1.VMRunning || vm.Status.IdleStopAt != nil {
			t.Fatalf("with an SSH session open for %s (ssh exited: %v): %s, idle stop %v (%s); want Running, unwarned; the launcher says:\n%s",
				time.Since(held).Round(time.Second), session.ProcessState, vm.Status.Phase, vm.Status.IdleStopAt, vm.Status.Message, launcherActivity(vm))
		}
	}
	t.Logf("with an SSH session open, the VM ran on, unwarned, for %s (idle timeout %s)", time.Since(held).Round(time.Second), vmIdleTimeout)
	endSession()
	released := time.Now()
	var warned string
	waitFor(t, vmIdleTimeout+3*activityReadings, "VM "+vm.Name+" warned of its idle stop", func(ctx context.Context) error {
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(vm), vm); err != nil {
			return err
		}
		if vm.Status.IdleStopAt == nil {
			return fmt.Errorf("phase %s, no warning: %s", vm.Status.Phase, vm.Status.Message)
		}
		warned = vm.Status.Message
		return nil
	})
	waitFor(t, vmIdleTimeout+3*activityReadings+2*time.Minute, "VM "+vm.Name+" stopped for being idle, its launcher pod gone", func(ctx context.Context) error {
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(vm), vm); err != nil {
			return err
		}
		err := k8sClient.Get(ctx, client.ObjectKey{Namespace: vm.Namespace, Name: vm.Name + "-launcher"}, &corev1.Pod{})
		if vm.Status.Phase != infrav1alpha1.VMStopped || vm.Status.StoppedReason != infrav1alpha1.StoppedIdle || !apierrors.IsNotFound(err) {
			return fmt.Errorf("phase %s, stopped %q (%s), pod: %v", vm.Status.Phase, vm.Status.StoppedReason, vm.Status.Message, err)
		}
		return nil
	})
	t.Logf("left alone: warned (%s), stopped %s after the session ended (%s)", warned, time.Since(released).Round(time.Second), vm.Status.Message)
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
	cmd := vmSSHCommand(vm, key, portForward(t, vm.Namespace, "svc/"+vm.Name, 22), command)
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

// launcherActivity is what the VM's launcher answers the operator, asked from inside its
// container, with its kernel's TCP table: what a failure of the idle checks is read against.
func launcherActivity(vm *infrav1alpha1.VirtualMachine) string {
	script := `printf 'GET /activity HTTP/1.1\r\nAuthorization: Bearer %s\r\n\r\n' "$(cat /cloud-init/activity-token)" | vm-launcher activity; echo; cat /proc/net/tcp`
	out, err := kubectlCmd("exec", "-n", vm.Namespace, vm.Name+"-launcher", "-c", "launcher", "--", "sh", "-c", script).CombinedOutput()
	return fmt.Sprintf("%s(%v)", out, err)
}

// vmSSHCommand is ssh running command in the guest, through the local port of a port-forward.
func vmSSHCommand(vm *infrav1alpha1.VirtualMachine, key, port, command string) *exec.Cmd {
	return exec.Command("ssh", "-i", key, "-p", port, "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
		"-o", "BatchMode=yes", "-o", "ConnectTimeout=20", "-o", "LogLevel=ERROR", "debian@127.0.0.1", command)
}

// vmClaim is the VM's own claim of the disk ("disk", the data disk; "root", the root disk),
// controlled by the VM.
func vmClaim(t *testing.T, vm *infrav1alpha1.VirtualMachine, disk string) *corev1.PersistentVolumeClaim {
	t.Helper()
	claim := &corev1.PersistentVolumeClaim{}
	if err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: vm.Namespace, Name: vm.Name + "-" + disk}, claim); err != nil {
		t.Fatal(err)
	}
	if o := metav1.GetControllerOf(claim); o == nil || o.UID != vm.UID {
		t.Fatalf("the claim %s is controlled by %+v, not the VM %s", claim.Name, o, vm.UID)
	}
	return claim
}

// haltVM sets runStrategy Halted and checks that the guest powers off (the pod ends) within
// the shutdown grace period, which the kubelet would otherwise end with a kill, and that its
// claims are kept.
func haltVM(t *testing.T, vm *infrav1alpha1.VirtualMachine, claims ...*corev1.PersistentVolumeClaim) {
	t.Helper()
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
	for _, claim := range claims {
		var pvc corev1.PersistentVolumeClaim
		if err := k8sClient.Get(context.Background(), client.ObjectKeyFromObject(claim), &pvc); err != nil || pvc.UID != claim.UID {
			t.Errorf("the claim %s after halting: %v (uid %s, want %s)", claim.Name, err, pvc.UID, claim.UID)
		}
	}
}

func setRunStrategy(t *testing.T, vm *infrav1alpha1.VirtualMachine, s infrav1alpha1.RunStrategy) {
	t.Helper()
	patch := client.MergeFrom(vm.DeepCopy())
	vm.Spec.RunStrategy = s
	if err := k8sClient.Patch(context.Background(), vm, patch); err != nil {
		t.Fatal(err)
	}
}

// checkCrashingVM: a VM whose launcher cannot start its guest (the node's own CPU model asked
// for in software emulation: the launcher exits 1 at once, every time) is stopped after the
// operator's three failed starts, within a few minutes of the kubelet's back-off, its disk
// kept, Degraded StartFailed with the launcher's last words: never "starting" forever. Its root
// disk is Ephemeral: the container disk's copy in the pod, the other kind a node runs.
func checkCrashingVM(t *testing.T) {
	ctx := context.Background()
	vm := &infrav1alpha1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: "crashing-vm", Namespace: testNS},
		Spec: infrav1alpha1.VirtualMachineSpec{
			Memory:   ptr.To(resource.MustParse("256Mi")),
			Disk:     infrav1alpha1.VMDisk{VMVolume: infrav1alpha1.VMVolume{Size: ptr.To(resource.MustParse("1Gi"))}},
			RootDisk: infrav1alpha1.VMRootDisk{Persistence: infrav1alpha1.RootDiskEphemeral},
			CPUModel: "host",
		},
	}
	if err := k8sClient.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), vm) })
	waitFor(t, 5*time.Minute, "VM "+vm.Name+" stopped after its failed starts, its launcher pod gone", func(ctx context.Context) error {
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(vm), vm); err != nil {
			return err
		}
		err := k8sClient.Get(ctx, client.ObjectKey{Namespace: vm.Namespace, Name: vm.Name + "-launcher"}, &corev1.Pod{})
		if vm.Status.Phase != infrav1alpha1.VMStopped || vm.Status.StoppedReason != infrav1alpha1.StoppedStartFailed || !apierrors.IsNotFound(err) {
			return fmt.Errorf("phase %s, stopped %q, failed starts %d (%s), pod: %v", vm.Status.Phase, vm.Status.StoppedReason, vm.Status.FailedStarts, vm.Status.Message, err)
		}
		return nil
	})
	degraded := meta.FindStatusCondition(vm.Status.Conditions, infrav1alpha1.ConditionDegraded)
	if degraded == nil || degraded.Status != metav1.ConditionTrue || degraded.Reason != infrav1alpha1.ReasonStartFailed ||
		!strings.Contains(degraded.Message, "VM_CPU_MODEL=host needs VM_ACCEL=kvm") {
		t.Errorf("Degraded %+v; want StartFailed with the launcher's last words", degraded)
	}
	vmClaim(t, vm, "disk")
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: vm.Namespace, Name: vm.Name + "-root"}, &corev1.PersistentVolumeClaim{}); !apierrors.IsNotFound(err) {
		t.Errorf("an Ephemeral root disk has a claim: %v", err)
	}
	if !strings.Contains(vm.Status.Message, "the data disk is kept (the Ephemeral root disk starts afresh)") {
		t.Errorf("stopped: %q, want it to say that only the data disk is kept", vm.Status.Message)
	}
	t.Logf("stopped: %s", vm.Status.Message)
}
