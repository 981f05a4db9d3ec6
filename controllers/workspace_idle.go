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
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/workspace"
)

// DefaultIdleWarning is how long before an idle stop a workspace says it is coming.
const DefaultIdleWarning = 5 * time.Minute

// codeServerHeartbeat is how often code-server's heartbeat beats while the IDE is in use (its
// Heart's heartbeatInterval): a request beats it only when the last beat is older.
const codeServerHeartbeat = time.Minute

// DefaultActivityInterval is how often the operator reads each running IDE's activity. An IDE
// whose activity was last read more than three intervals ago is of unknown use, and not
// stopped.
const DefaultActivityInterval = 30 * time.Second

// idlePolicy is what decides a running workspace's idle stop: the operator's timeout, warning
// and reading interval, and what is known of the workspace's use.
type idlePolicy struct {
	timeout, warning, interval time.Duration
	use                        workspace.Use
}

// stale is how old a reading of an IDE's activity may be and still count.
func (p idlePolicy) stale() time.Duration { return 3 * cmp.Or(p.interval, DefaultActivityInterval) }

// timeoutFor is ws's idle timeout: the shorter of its own and the operator's, either when the
// other is unset; 0 when neither is (no idle stop).
func (p idlePolicy) timeoutFor(ws *infrav1alpha1.Workspace) time.Duration {
	own := time.Duration(0)
	if ws.Spec.IdleTimeout != nil {
		own = ws.Spec.IdleTimeout.Duration
	}
	if own <= 0 || (p.timeout > 0 && p.timeout < own) {
		return p.timeout
	}
	return own
}

// idleStatus is a running IDE's status with the idle policy applied: unused for its timeout,
// it is stopped (StoppedIdle); within the warning before that, status.idleStopAt and the
// message say when. Its idle time counts from its last use or, when none was seen since it
// started, from its start; an IDE whose activity the operator has not read lately is never
// stopped (its use is unknown, not nil).
func idleStatus(ws *infrav1alpha1.Workspace, st infrav1alpha1.WorkspaceStatus, p idlePolicy, now time.Time) infrav1alpha1.WorkspaceStatus {
	stopAt, warnAt, ok := idleTimes(ws, st, p, now)
	switch {
	case !ok || now.Before(warnAt):
		return st
	case now.Before(stopAt) || p.use.Read.Before(stopAt):
		// Stopped only on a reading taken after the stop time that still shows no use.
		at := metav1.NewTime(stopAt.Truncate(time.Second))
		st.IdleStopAt = &at
		st.Message = fmt.Sprintf("unused since %s: stops at %s, its storage kept, unless used before", stopAt.Add(-p.timeoutFor(ws)).UTC().Format(time.RFC3339), at.UTC().Format(time.RFC3339))
		return st
	}
	st.Phase, st.StoppedReason = infrav1alpha1.WorkspaceStopping, infrav1alpha1.StoppedIdle
	st.Message = fmt.Sprintf("stopped after %s unused; the storage is kept", p.timeoutFor(ws))
	return st
}

// idleTimes are when a running IDE is to be stopped for being unused and warned of it; ok is
// false when no idle stop applies (no timeout, or its use unknown).
func idleTimes(ws *infrav1alpha1.Workspace, st infrav1alpha1.WorkspaceStatus, p idlePolicy, now time.Time) (stopAt, warnAt time.Time, ok bool) {
	timeout := p.timeoutFor(ws)
	if timeout <= 0 || st.StartedAt == nil || now.Sub(p.use.Read) > p.stale() {
		return time.Time{}, time.Time{}, false
	}
	last := st.StartedAt.Time
	if p.use.Last.After(last) {
		last = p.use.Last
	}
	stopAt = last.Add(timeout)
	return stopAt, stopAt.Add(-min(p.warning, timeout/2)), true
}

// untilIdleCheck is how long until a running IDE's idle status may change: its warning, its
// stop, or (in the warning, or of unknown use) the next reading of its activity. 0 when no idle
// stop applies.
func untilIdleCheck(ws *infrav1alpha1.Workspace, st infrav1alpha1.WorkspaceStatus, p idlePolicy, now time.Time) time.Duration {
	if st.Phase != infrav1alpha1.WorkspaceRunning || p.timeoutFor(ws) <= 0 {
		return 0
	}
	stopAt, warnAt, ok := idleTimes(ws, st, p, now)
	switch {
	case !ok || !now.Before(warnAt):
		return cmp.Or(p.interval, DefaultActivityInterval)
	default:
		return min(max(warnAt.Sub(now), time.Second), max(stopAt.Sub(now), time.Second))
	}
}

// activityProbe reads each running IDE's own account of its use into the activity record:
// code-server's /healthz answers its last heartbeat, which any request but a health check
// beats, and an open connection (an IDE tab, a terminal) beats every minute. The probe's own
// connection is closed after each read, so that it never counts as one. It runs on the leader,
// every interval, only for workspaces an idle timeout applies to.
type activityProbe struct {
	reader   client.Reader
	activity *workspace.Activity
	idle     idlePolicy // the operator's timeout; use is per workspace
	http     *http.Client
}

func newActivityProbe(reader client.Reader, cfg WorkspaceConfig) *activityProbe {
	transport := &http.Transport{DisableKeepAlives: true, DialContext: (&net.Dialer{Timeout: 2 * time.Second}).DialContext}
	return &activityProbe{reader: reader, activity: cfg.Activity, idle: cfg.idle(workspace.Use{}),
		http: &http.Client{Transport: transport, Timeout: 3 * time.Second}}
}

// NeedLeaderElection: only the leader's reconciles read the record.
func (*activityProbe) NeedLeaderElection() bool { return true }

func (p *activityProbe) Start(ctx context.Context) error {
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := p.probeAll(ctx); err != nil {
			log.FromContext(ctx).Error(err, "reading the IDEs' activity")
		}
	}, cmp.Or(p.idle.interval, DefaultActivityInterval))
	return nil
}

// probeAll reads the activity of every running workspace an idle timeout applies to, a few
// at a time, and forgets the workspaces that are gone.
func (p *activityProbe) probeAll(ctx context.Context) error {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(infrav1alpha1.GroupVersion.WithKind("WorkspaceList"))
	if err := p.reader.List(ctx, list); err != nil {
		return fmt.Errorf("listing workspaces: %w", err)
	}
	// The use of every workspace there is is kept: a stopped one's calls say it is not stale.
	live := map[types.UID]bool{}
	for i := range list.Items {
		live[list.Items[i].GetUID()] = true
	}
	var wg sync.WaitGroup
	slots := make(chan struct{}, 8)
	for i := range list.Items {
		// Only running IDEs are read: their phase is looked at before the whole object is decoded.
		if phase, _, _ := unstructured.NestedString(list.Items[i].Object, "status", "phase"); phase != string(infrav1alpha1.WorkspaceRunning) {
			continue
		}
		ws, err := workspace.Decode(&list.Items[i])
		if err != nil || ws.Status.Phase != infrav1alpha1.WorkspaceRunning || ws.Status.PodIP == "" || p.idle.timeoutFor(ws) <= 0 {
			continue
		}
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			p.probe(ctx, ws)
		})
	}
	wg.Wait()
	p.activity.Keep(func(uid types.UID) bool { return live[uid] })
	return nil
}

// probe reads one IDE's last heartbeat; an IDE that does not answer is left unread.
func (p *activityProbe) probe(ctx context.Context, ws *infrav1alpha1.Workspace) {
	port := int(orDefault(ws.Status.Port, workspace.DefaultPort))
	url := "http://" + net.JoinHostPort(ws.Status.PodIP, strconv.Itoa(port)) + "/healthz"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return
	}
	resp, err := p.http.Do(req)
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
	p.activity.Read(ws.UID, now, last)
}
