package realnode

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
)

// guestProcess is a process the suite starts in its VM's guest before its idle stop: it holds
// a value only in its own memory and writes it to /tmp/said when sent SIGUSR1.
type guestProcess struct {
	pid, value string
	// uptime is the guest's uptime in seconds when the process started.
	uptime float64
}

// startGuestProcess starts rv's guest process, and reads the guest's uptime.
func startGuestProcess(t *testing.T, rv *realVM) {
	t.Helper()
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	value := hex.EncodeToString(b)
	out := vmSSH(t, rv.VirtualMachine, rv.key, `nohup sh -c 'v=`+value+`; trap "echo \$v > /tmp/said" USR1; while :; do sleep 1; done' >/dev/null 2>&1 </dev/null & echo $!; cut -d' ' -f1 /proc/uptime`)
	pid, uptime := wordAndUptime(t, out, "starting the guest's process")
	rv.process = guestProcess{pid: pid, value: value, uptime: uptime}
}

// wordAndUptime reads out, the guest's answer to what: a word, then its uptime in seconds.
func wordAndUptime(t *testing.T, out, what string) (string, float64) {
	t.Helper()
	fields := strings.Fields(out)
	if len(fields) != 2 {
		t.Fatalf("%s: %q, want a word and the guest's uptime", what, out)
	}
	uptime, err := strconv.ParseFloat(fields[1], 64)
	if err != nil {
		t.Fatalf("%s: %q: %v", what, out, err)
	}
	return fields[0], uptime
}

// processSays asks rv's guest process for its value, and reads the guest's uptime: what it
// says, or "gone" when no process with its pid holds its value (a guest booted afresh).
func processSays(t *testing.T, rv *realVM) (string, float64) {
	t.Helper()
	p := rv.process
	out := vmSSH(t, rv.VirtualMachine, rv.key, fmt.Sprintf(
		`if grep -q %s /proc/%s/cmdline 2>/dev/null; then rm -f /tmp/said; kill -USR1 %s; for i in 1 2 3 4 5 6 7 8 9 10; do [ -s /tmp/said ] && break; sleep 1; done; cat /tmp/said; else echo gone; fi; cut -d' ' -f1 /proc/uptime`,
		p.value, p.pid, p.pid))
	return wordAndUptime(t, out, "asking the guest's process")
}

// waitHibernation waits until rv's status.hibernation is in state (and later than after, when
// given), and returns it.
func waitHibernation(t *testing.T, rv *realVM, state infrav1alpha1.HibernationState, after *infrav1alpha1.VMHibernation, timeout time.Duration) infrav1alpha1.VMHibernation {
	t.Helper()
	vm := rv.VirtualMachine
	waitFor(t, timeout, "VM "+vm.Name+"'s hibernation "+string(state), func(ctx context.Context) error {
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(vm), vm); err != nil {
			return err
		}
		h := vm.Status.Hibernation
		if h == nil || h.State != state || (after != nil && !h.Time.After(after.Time.Time)) {
			return fmt.Errorf("hibernation %+v; phase %s: %s", h, vm.Status.Phase, vm.Status.Message)
		}
		return nil
	})
	return *vm.Status.Hibernation
}

// checkHibernated: the VM stopped for being idle saved its guest's state (stopAction
// Hibernate), which its status says, with the state's size.
func checkHibernated(t *testing.T, rv *realVM) {
	t.Helper()
	h := waitHibernation(t, rv, infrav1alpha1.HibernationSaved, nil, time.Minute)
	if h.Size == nil || h.Size.Cmp(resource.MustParse("16Mi")) < 0 || h.Size.Cmp(*rv.Spec.Memory) > 0 {
		t.Errorf("the saved state's size %v, want from 16Mi to the guest's memory %s", h.Size, rv.Spec.Memory)
	}
	if !strings.Contains(rv.Status.Message, "is saved, and a start resumes it") {
		t.Errorf("the stopped VM says %q, not that a start resumes its saved state", rv.Status.Message)
	}
	t.Logf("hibernated: the guest's state is %s (%s)", h.Size, rv.Status.Message)
}

// launcherReadyIn is how long the VM's launcher pod took from its creation to ready: until the
// guest's SSH server answered its probe.
func launcherReadyIn(t *testing.T, vm *infrav1alpha1.VirtualMachine) time.Duration {
	t.Helper()
	pod := launcherPod(t, vm)
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.Sub(pod.CreationTimestamp.Time)
		}
	}
	t.Fatalf("the launcher pod %s is not ready", pod.Name)
	return 0
}

// checkResumed: started again after its hibernation, the guest carries on: the process started
// before runs, with the value it held only in memory, the guest's uptime went on, and the
// status says Resumed. It returns how long the resume took, from the launcher pod's creation to
// the guest's SSH server answering.
func checkResumed(t *testing.T, rv *realVM) time.Duration {
	t.Helper()
	took := launcherReadyIn(t, rv.VirtualMachine)
	said, uptime := processSays(t, rv)
	if said != rv.process.value {
		t.Errorf("after the resume the guest's process says %q, want the value it held in memory, %q", said, rv.process.value)
	}
	if uptime <= rv.process.uptime {
		t.Errorf("after the resume the guest's uptime is %.0f s, want more than the %.0f s before its stop", uptime, rv.process.uptime)
	}
	h := waitHibernation(t, rv, infrav1alpha1.HibernationResumed, nil, 2*activityReadings)
	t.Logf("resumed the guest's state of %s in %s (launcher pod created to SSH answering); its uptime %.0f s, %.0f s before the stop",
		h.Size, took, uptime, rv.process.uptime)
	return took
}

// checkMismatchBootsCold: the guest's memory changed, its saved state (made as the changed
// spec replaced the launcher) no longer fits: the start discards it, saying why, and boots the
// guest cold, its root and data disks kept, its process gone. The cold boot, timed as the
// resume was, must take several times as long.
func checkMismatchBootsCold(t *testing.T, rv *realVM, resumed time.Duration) {
	t.Helper()
	vm := rv.VirtualMachine
	before := *vm.Status.Hibernation
	patch := client.MergeFrom(vm.DeepCopy())
	vm.Spec.Memory = ptr.To(resource.MustParse("960Mi"))
	if err := k8sClient.Patch(context.Background(), vm, patch); err != nil {
		t.Fatal(err)
	}
	h := waitHibernation(t, rv, infrav1alpha1.HibernationDiscarded, &before, vmBootTimeout)
	if !strings.Contains(h.Reason, "CPUs and memory changed") {
		t.Errorf("the saved state was discarded because %q, want the memory's change", h.Reason)
	}
	waitVMRunning(t, vm)
	cold := launcherReadyIn(t, vm)
	said, _ := processSays(t, rv)
	t.Logf("booted cold in %s (launcher pod created to SSH answering): %s; the resume took %s, %.1f times less",
		cold, h.Reason, resumed, cold.Seconds()/max(resumed.Seconds(), 1))
	if cold < 3*resumed {
		t.Errorf("the cold boot took %s, the resume %s: want the resume several times faster", cold, resumed)
	}
	if said != "gone" {
		t.Errorf("after a cold boot the guest's process says %q, want it gone", said)
	}
	checkHomeKept(t, rv, "a cold boot from a discarded state")
}

// stopHibernating sets rv's stopAction back to PowerOff: its launcher is replaced, hibernating
// once more, and the new one resumes that state all the same (the user's work), and powers
// off at its stops from then on. That resume is in the start histogram, which Prometheus
// scrapes, as phase resume.
func stopHibernating(t *testing.T, rv *realVM, prom prometheusServer) {
	t.Helper()
	vm := rv.VirtualMachine
	before := *vm.Status.Hibernation
	patch := client.MergeFrom(vm.DeepCopy())
	vm.Spec.StopAction = infrav1alpha1.StopPowerOff
	if err := k8sClient.Patch(context.Background(), vm, patch); err != nil {
		t.Fatal(err)
	}
	waitHibernation(t, rv, infrav1alpha1.HibernationResumed, &before, vmBootTimeout)
	waitVMRunning(t, vm)
	t.Logf("resumed once more with stopAction PowerOff in %s", launcherReadyIn(t, vm))
	waitFor(t, 2*time.Minute, "the resume in Prometheus", func(ctx context.Context) error {
		return prom.expectSeries(ctx, `cloudspace_start_seconds_count{kind="VirtualMachine",phase="resume"} > 0`)
	})
}
