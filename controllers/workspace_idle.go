package controllers

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/activity"
	"github.com/cloudspace-dev/cloudspace-operator/internal/workspace"
)

// codeServerHeartbeat is how often code-server's heartbeat beats while the IDE is in use (its
// Heart's heartbeatInterval): a request beats it only when the last beat is older.
const codeServerHeartbeat = time.Minute

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

// idleStatus is a running IDE's status with the idle policy applied: unused for its timeout,
// it is stopped (StoppedIdle), its storage kept; within the warning before that,
// status.idleStopAt and the message say when.
func idleStatus(ws *infrav1alpha1.Workspace, st infrav1alpha1.WorkspaceStatus, p idlePolicy, now time.Time) infrav1alpha1.WorkspaceStatus {
	v := p.verdict(ws.Spec.IdleTimeout, st.StartedAt, ws.Status.IdleStopAt, now, workspaceKept)
	switch {
	case v.stop:
		st.Phase, st.StoppedReason, st.Message = infrav1alpha1.WorkspaceStopping, infrav1alpha1.StoppedIdle, v.message
	case v.stopAt != nil:
		st.IdleStopAt, st.Message = v.stopAt, v.message
	}
	return st
}
