package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/access"
	"github.com/cloudspace-dev/cloudspace-operator/internal/activity"
)

// vmActivityPort is the launcher's activity port (VM_ACTIVITY_PORT in images/vm-launcher),
// unless the guest forwards that TCP port itself: then the next one it does not.
const vmActivityPort = 9922

// activityPort is the port the launcher of a VM with these ports serves its activity on.
func activityPort(ports []infrav1alpha1.VMPort) int32 {
	port := int32(vmActivityPort)
	for slices.ContainsFunc(ports, func(p infrav1alpha1.VMPort) bool {
		return p.Port == port && strings.EqualFold(orDefault(p.Protocol, "TCP"), "TCP")
	}) {
		port++
	}
	return port
}

// idleApplies reports whether the operator stops vm (defaulted) when it is unused: an idle
// timeout applies to it, it runs on the pod backend (our launcher serves its activity), and
// the operator keeps an activity record and holds the key its credentials derive from.
func (c VMConfig) idleApplies(vm *infrav1alpha1.VirtualMachine) bool {
	backend := orDefault(vm.Status.Backend, vm.Spec.Backend)
	return c.readsLaunchers() && backend != infrav1alpha1.BackendKubeVirt &&
		c.idle(activity.Use{}).timeoutFor(vm.Spec.IdleTimeout) > 0
}

// servesActivity reports whether the launcher of vm (defaulted) serves its activity to the
// operator: when an idle stop applies to it, and when it hibernates or ever did (its account of
// a start says whether it resumed a saved state, which a launcher resumes after stopAction went
// back to PowerOff too; and a VM's endpoint that came and went would replace its launcher).
func (c VMConfig) servesActivity(vm *infrav1alpha1.VirtualMachine) bool {
	return c.idleApplies(vm) ||
		((hibernates(vm) || vm.Status.Hibernation != nil) && c.readsLaunchers())
}

// readsLaunchers reports whether the operator reads the launchers' activity endpoints: it keeps
// an activity record and holds the key their credentials derive from.
func (c VMConfig) readsLaunchers() bool {
	return c.Activity != nil && len(c.AccessKey) > 0
}

// activityValues are the chart's values for the launcher's activity endpoint: its port, and
// the credentials it serves with (the cloud-init Secret carries them); nil when it serves none
// (servesActivity), so that such a VM renders as before.
func (c VMConfig) activityValues(vm *infrav1alpha1.VirtualMachine) (map[string]any, error) {
	if !c.servesActivity(vm) {
		return nil, nil
	}
	creds, err := access.VMActivityCredentials(c.AccessKey, vm.UID)
	if err != nil {
		return nil, fmt.Errorf("deriving the launcher's activity credentials: %w", err)
	}
	return map[string]any{"port": int64(activityPort(vm.Spec.Ports)), "token": creds.Token, "pem": string(creds.PEM),
		"reader": c.OperatorNamespace}, nil
}

// newVMActivityProbe reads each running VM's activity from its launcher into the activity
// record: the connections to the guest's forwarded TCP ports (an SSH session) and its console's
// input, as the launcher sees them without a guest agent. Each read is a TLS connection pinned
// to the VM's own certificate, with its bearer token: no launcher can answer for another VM, and
// no one but the operator reads a VM's use. Only VMs an idle stop applies to are read.
func newVMActivityProbe(reader client.Reader, cfg VMConfig) *activityProbe[*infrav1alpha1.VirtualMachine] {
	launcher := launcherReader{cfg: cfg, dialer: &net.Dialer{Timeout: 2 * time.Second}}
	return newActivityProbe(reader, cfg.Activity, cfg.ActivityInterval, vmGVK, cfg.probedVM, launcher.read)
}

// probedVM is the VM obj if its launcher is to be read: running, at an address, and serving
// its activity.
func (c VMConfig) probedVM(obj *unstructured.Unstructured) (*infrav1alpha1.VirtualMachine, bool) {
	if !inPhase(obj, string(infrav1alpha1.VMRunning)) {
		return nil, false
	}
	vm, err := decodeVM(obj)
	if err != nil || vm.Status.IP == "" || !c.servesActivity(vm) {
		return nil, false
	}
	return vm, true
}

// launcherReader reads a VM launcher's account of its guest's use into the activity record.
type launcherReader struct {
	cfg    VMConfig
	dialer *net.Dialer
}

// maxIdleSeconds bounds the idle time a launcher may claim (a year): past it, a Duration would
// overflow, and no timeout is that long.
const maxIdleSeconds = 365 * 24 * 3600

// launcherActivity is the launcher's answer (`vm-launcher activity`).
type launcherActivity struct {
	// Connections are the established connections to the guest's forwarded TCP ports now.
	Connections int `json:"connections"`
	// IdleSeconds is how long since the launcher last saw a connection or console input, or
	// since it started when it saw none; 0 while a connection is open.
	IdleSeconds int64 `json:"idleSeconds"`
	// ResumedMiB is the size of the saved state this start resumed; absent when it resumed none.
	ResumedMiB *int64 `json:"resumedMiB,omitempty"`
	// Discarded says why this start discarded the saved state it found (and booted cold).
	Discarded string `json:"discarded,omitempty"`
}

// read reads one launcher's activity; a launcher that does not answer is left unread, so
// that its VM's use is unknown and it is not stopped.
func (r launcherReader) read(ctx context.Context, vm *infrav1alpha1.VirtualMachine) {
	got, err := r.ask(ctx, vm)
	if err != nil {
		log.FromContext(ctx).V(1).Info("a VM's activity could not be read", "virtualMachine", client.ObjectKeyFromObject(vm), "error", err.Error())
		return
	}
	now := time.Now()
	last := now
	if got.Connections == 0 {
		// Seconds are the launcher's own count, so the node's clock does not matter.
		last = now.Add(-time.Duration(min(max(got.IdleSeconds, 0), maxIdleSeconds)) * time.Second)
	}
	r.cfg.Activity.Read(vm.UID, now, last)
	if h, ok := got.startReport(now); ok {
		r.cfg.Hibernations.report(client.ObjectKeyFromObject(vm), vm.UID, h)
	}
}

// ask asks vm's launcher for its activity.
func (r launcherReader) ask(ctx context.Context, vm *infrav1alpha1.VirtualMachine) (launcherActivity, error) {
	creds, err := access.VMActivityCredentials(r.cfg.AccessKey, vm.UID)
	if err != nil {
		return launcherActivity{}, fmt.Errorf("deriving the VM's activity credentials: %w", err)
	}
	transport := &http.Transport{DisableKeepAlives: true, DialContext: r.dialer.DialContext, TLSClientConfig: creds.ClientTLS()}
	defer transport.CloseIdleConnections()
	hc := &http.Client{Transport: transport, Timeout: 5 * time.Second}
	url := "https://" + net.JoinHostPort(vm.Status.IP, strconv.Itoa(int(activityPort(vm.Spec.Ports)))) + "/activity"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return launcherActivity{}, fmt.Errorf("asking %s: %w", url, err)
	}
	req.Header.Set("Authorization", "Bearer "+creds.Token)
	resp, err := hc.Do(req)
	if err != nil {
		return launcherActivity{}, fmt.Errorf("reading %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return launcherActivity{}, fmt.Errorf("the launcher answered %s", resp.Status)
	}
	var got launcherActivity
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4096)).Decode(&got); err != nil {
		return launcherActivity{}, fmt.Errorf("decoding the launcher's answer: %w", err)
	}
	return got, nil
}

// vmIdleStatus is a running VM's status with the idle policy applied: unused for its timeout,
// it is stopped (StoppedIdle), its disk kept; within the warning before that,
// status.idleStopAt and the message say when. Unlike a workspace's, whose phase machine applies
// the policy once its IDE is ready, a VM's status is complete before: this looks at its phase
// itself, and keeps status.status, which repeats the phase, in step.
func vmIdleStatus(vm *infrav1alpha1.VirtualMachine, st infrav1alpha1.VirtualMachineStatus, p idlePolicy, now time.Time) infrav1alpha1.VirtualMachineStatus {
	if st.Phase != infrav1alpha1.VMRunning {
		return st
	}
	v := p.verdict(vm.Spec.IdleTimeout, st.StartedAt, vm.Status.IdleStopAt, now, vmKept(vm.Spec))
	switch {
	case v.stop:
		st.Phase, st.StoppedReason, st.Message = infrav1alpha1.VMStopping, infrav1alpha1.StoppedIdle, v.message
	case v.stopAt != nil:
		st.IdleStopAt, st.Message = v.stopAt, v.message
	}
	st.Status = string(st.Phase)
	return st
}
