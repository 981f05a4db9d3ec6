package controllers

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/activity"
	"github.com/cloudspace-dev/cloudspace-operator/internal/workspace"
)

// DefaultIdleWarning is how long before an idle stop a workspace says it is coming.
const DefaultIdleWarning = 5 * time.Minute

// codeServerHeartbeat is how often code-server's heartbeat beats while the IDE is in use (its
// Heart's heartbeatInterval): a request beats it only when the last beat is older.
const codeServerHeartbeat = time.Minute

// idlePolicy is what decides a running workspace's idle stop: the operator's timeout, warning
// and reading interval, and what is known of the workspace's use.
type idlePolicy struct {
	timeout, warning, interval time.Duration
	use                        activity.Use
}

// readingMaxAge is how old a reading of a resource's activity (its IDE's, its launcher's) may
// be and still count: older, its use is unknown.
func (p idlePolicy) readingMaxAge() time.Duration {
	return 3 * cmp.Or(p.interval, DefaultActivityInterval)
}

// timeoutFor is the idle timeout of a resource whose spec asks for own: the shorter of its own
// and the operator's, either when the other is unset; 0 when neither is (no idle stop).
func (p idlePolicy) timeoutFor(own *metav1.Duration) time.Duration {
	if own == nil || own.Duration <= 0 || (p.timeout > 0 && p.timeout < own.Duration) {
		return p.timeout
	}
	return own.Duration
}

// verdict applies the idle policy to a running resource whose spec asks for own, running since
// startedAt, and warned of its stop by its last status or not: unused for its timeout, it is to
// stop; within the warning before that, stopAt says when. Its idle time counts from its last
// use or, when none was seen since it started, from its start. Each step needs a reading of its
// activity taken since that step's time that still shows no use (a reading from before, with a
// session opened since, must not warn of a stop), and a stop needs the warning first: a
// resource whose readings were late is warned now and stopped at the next look. One whose
// activity was not read lately is never stopped (its use is unknown, not nil).
func (p idlePolicy) verdict(own *metav1.Duration, startedAt *metav1.Time, warned bool, now time.Time) (stopAt *metav1.Time, stop bool) {
	at, warnAt, ok := p.idleTimes(own, startedAt, now)
	switch {
	case !ok || now.Before(warnAt) || p.use.Read.Before(warnAt):
		return nil, false
	case now.Before(at) || p.use.Read.Before(at) || !warned:
		t := metav1.NewTime(latest(at, now).Truncate(time.Second))
		return &t, false
	}
	return nil, true
}

// warningMessage is the status message of a resource to be stopped at stopAt, keeping what (its
// storage, its disk).
func (p idlePolicy) warningMessage(own *metav1.Duration, stopAt *metav1.Time, what string) string {
	return fmt.Sprintf("unused since %s: stops at %s, %s kept, unless used before",
		stopAt.Add(-p.timeoutFor(own)).UTC().Format(time.RFC3339), stopAt.UTC().Format(time.RFC3339), what)
}

// stoppedMessage is the status message of a resource stopped for being unused, keeping what.
func (p idlePolicy) stoppedMessage(own *metav1.Duration, what string) string {
	return fmt.Sprintf("stopped after %s unused; %s is kept", p.timeoutFor(own), what)
}

// idleStatus is a running IDE's status with the idle policy applied: unused for its timeout,
// it is stopped (StoppedIdle); within the warning before that, status.idleStopAt and the
// message say when.
func idleStatus(ws *infrav1alpha1.Workspace, st infrav1alpha1.WorkspaceStatus, p idlePolicy, now time.Time) infrav1alpha1.WorkspaceStatus {
	stopAt, stop := p.verdict(ws.Spec.IdleTimeout, st.StartedAt, ws.Status.IdleStopAt != nil, now)
	switch {
	case stop:
		st.Phase, st.StoppedReason = infrav1alpha1.WorkspaceStopping, infrav1alpha1.StoppedIdle
		st.Message = p.stoppedMessage(ws.Spec.IdleTimeout, "the storage")
	case stopAt != nil:
		st.IdleStopAt, st.Message = stopAt, p.warningMessage(ws.Spec.IdleTimeout, stopAt, "its storage")
	}
	return st
}

// idleTimes are when a running resource is to be stopped for being unused and warned of it;
// ok is false when no idle stop applies (no timeout, or its use unknown).
func (p idlePolicy) idleTimes(own *metav1.Duration, startedAt *metav1.Time, now time.Time) (stopAt, warnAt time.Time, ok bool) {
	timeout := p.timeoutFor(own)
	if timeout <= 0 || startedAt == nil || now.Sub(p.use.Read) > p.readingMaxAge() {
		return time.Time{}, time.Time{}, false
	}
	last := startedAt.Time
	if p.use.Last.After(last) {
		last = p.use.Last
	}
	stopAt = last.Add(timeout)
	return stopAt, stopAt.Add(-min(p.warning, timeout/2)), true
}

// untilCheck is how long until a resource's idle status may change: its warning, its stop, or
// (in the warning, or of unknown use) the next reading of its activity. 0 when it is not
// running or no idle stop applies.
func (p idlePolicy) untilCheck(running bool, own *metav1.Duration, startedAt *metav1.Time, now time.Time) time.Duration {
	if !running || p.timeoutFor(own) <= 0 {
		return 0
	}
	stopAt, warnAt, ok := p.idleTimes(own, startedAt, now)
	switch {
	case !ok || !now.Before(warnAt):
		return cmp.Or(p.interval, DefaultActivityInterval)
	default:
		return min(max(warnAt.Sub(now), time.Second), max(stopAt.Sub(now), time.Second))
	}
}

// newIDEActivityProbe reads each running IDE's own account of its use into the activity
// record: code-server's /healthz answers its last heartbeat, which any request but a health
// check beats, and an open connection (an IDE tab, a terminal) beats every minute. The probe's
// own connection is closed after each read, so that it never counts as one. Only workspaces an
// idle timeout applies to are read.
func newIDEActivityProbe(reader client.Reader, cfg WorkspaceConfig) *activityProbe[*infrav1alpha1.Workspace] {
	transport := &http.Transport{DisableKeepAlives: true, DialContext: (&net.Dialer{Timeout: 2 * time.Second}).DialContext}
	ide := ideActivity{record: cfg.Activity, http: &http.Client{Transport: transport, Timeout: 3 * time.Second}}
	idle := cfg.idle(activity.Use{}) // the operator's timeout; use is per workspace
	return newActivityProbe(reader, cfg.Activity, cfg.ActivityInterval, workspaceGVK,
		func(obj *unstructured.Unstructured) (*infrav1alpha1.Workspace, bool) { return probedIDE(obj, idle) }, ide.read)
}

// probedIDE is the workspace obj if its IDE is to be read: running, at an address, and with an
// idle timeout that applies to it.
func probedIDE(obj *unstructured.Unstructured, idle idlePolicy) (*infrav1alpha1.Workspace, bool) {
	if !inPhase(obj, string(infrav1alpha1.WorkspaceRunning)) {
		return nil, false
	}
	ws, err := workspace.Decode(obj)
	if err != nil || ws.Status.Phase != infrav1alpha1.WorkspaceRunning || ws.Status.PodIP == "" || idle.timeoutFor(ws.Spec.IdleTimeout) <= 0 {
		return nil, false
	}
	return ws, true
}

// ideActivity reads an IDE's last heartbeat into the activity record.
type ideActivity struct {
	record *activity.Record
	http   *http.Client
}

// read reads one IDE's last heartbeat; an IDE that does not answer is left unread.
func (r ideActivity) read(ctx context.Context, ws *infrav1alpha1.Workspace) {
	port := int(orDefault(ws.Status.Port, workspace.DefaultPort))
	url := "http://" + net.JoinHostPort(ws.Status.PodIP, strconv.Itoa(port)) + "/healthz"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return
	}
	resp, err := r.http.Do(req)
	if err != nil {
		log.FromContext(ctx).V(1).Info("an IDE's activity could not be read", "workspace", client.ObjectKeyFromObject(ws), "error", err.Error())
		return
	}
	defer resp.Body.Close()
	var health struct {
		LastHeartbeat int64 `json:"lastHeartbeat"` // milliseconds since the epoch; 0: none yet
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(io.LimitReader(resp.Body, 4096)).Decode(&health) != nil {
		return
	}
	now, last := time.Now(), time.Time{}
	if health.LastHeartbeat > 0 {
		// code-server beats at most once a heartbeat interval while in use: it was in use
		// until then, as far as this reading can tell.
		last = time.UnixMilli(health.LastHeartbeat).Add(codeServerHeartbeat)
		if last.After(now) {
			last = now
		}
	}
	r.record.Read(ws.UID, now, last)
}
