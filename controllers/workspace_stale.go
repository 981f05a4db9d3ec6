package controllers

import (
	"cmp"
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/activity"
	"github.com/cloudspace-dev/cloudspace-operator/internal/engine"
	"github.com/cloudspace-dev/cloudspace-operator/internal/workspace"
)

// DefaultStaleInterval is how often stale workspaces due for deletion are looked for.
const DefaultStaleInterval = time.Minute

// stalePolicy is what the operator's settings and the record of use bring to a stopped
// workspace's staleness.
type stalePolicy struct {
	after, deleteAfter time.Duration // 0: never
	use                activity.Use
}

// validateStale refuses stale settings that contradict each other.
func (c WorkspaceConfig) validateStale() error {
	switch {
	case c.StaleAfter < 0 || c.DeleteStaleAfter < 0:
		return fmt.Errorf("--workspace-stale-after %s, --workspace-delete-stale-after %s: durations must not be negative", c.StaleAfter, c.DeleteStaleAfter)
	case c.DeleteStaleAfter > 0 && c.DeleteStaleAfter <= c.StaleAfter:
		return fmt.Errorf("--workspace-delete-stale-after %s must exceed --workspace-stale-after %s: the gap is the owner's notice", c.DeleteStaleAfter, c.StaleAfter)
	case c.DeleteStaleAfter > 0 && c.StaleAfter == 0:
		return fmt.Errorf("--workspace-delete-stale-after %s needs --workspace-stale-after, which gives the owner notice", c.DeleteStaleAfter)
	}
	return nil
}

// stoppedStatus is a Stopped workspace's status: since when it is untouched (stopped, its spec
// unchanged, no call on it) and, once that has lasted the stale policy's time, stale and when
// it will be deleted. The times only move later, on a touch: an operator restart that forgets
// the calls it knew of, or a setting lowered, never brings a deletion sooner than the notice the
// report gave. A workspace still stopping is neither.
func stoppedStatus(ws *infrav1alpha1.Workspace, st infrav1alpha1.WorkspaceStatus, pol stalePolicy, now time.Time) infrav1alpha1.WorkspaceStatus {
	if st.Phase != infrav1alpha1.WorkspaceStopped {
		return st
	}
	prev := ws.Status
	since := now // stopped just now, or its spec changed since the last status
	if prev.Phase == infrav1alpha1.WorkspaceStopped && prev.UntouchedSince != nil && prev.ObservedGeneration == ws.Generation {
		since = latest(prev.UntouchedSince.Time, pol.use.Last)
	}
	st.UntouchedSince = ptrTime(since)
	reported, deleteAt, stale := pol.staleTimes(st.UntouchedSince.Time, prev.StaleSince, now)
	if !stale {
		return st
	}
	st.StaleSince, st.DeleteAt = reported, deleteAt
	note := fmt.Sprintf("stale: stopped and untouched since %s", since.UTC().Format(time.RFC3339))
	if deleteAt != nil {
		note += fmt.Sprintf("; it will be deleted at %s unless started or changed before", st.DeleteAt.UTC().Format(time.RFC3339))
	} else {
		note += "; start it, or delete it if it is no longer wanted"
	}
	if st.StoppedReason == "" {
		// A workspace the operator stopped keeps saying why; the event says it is stale.
		st.Message = note
	}
	return st
}

// staleTimes are, for something untouched since since and last reported stale at prevReport
// (nil: never), when it was reported stale and when it is to be deleted (nil: never); stale is
// false while it is not. A report from before the last touch is void. Deletion comes no sooner
// than the gap between the two settings after the report: that is the owner's notice.
func (pol stalePolicy) staleTimes(since time.Time, prevReport *metav1.Time, now time.Time) (reported, deleteAt *metav1.Time, stale bool) {
	if pol.after <= 0 || now.Before(since.Add(pol.after)) {
		return nil, nil, false
	}
	at := now
	if prevReport != nil && !prevReport.Time.Before(since) {
		at = prevReport.Time // reported before, and untouched since
	}
	reported = ptrTime(at)
	if pol.deleteAfter > 0 {
		deleteAt = ptrTime(latest(since.Add(pol.deleteAfter), at.Add(pol.deleteAfter-pol.after)))
	}
	return reported, deleteAt, true
}

// newlyStale reports whether st reports ws stale where its last status did not, or since
// another time: the Stale event is for the report, once.
func newlyStale(ws *infrav1alpha1.Workspace, st infrav1alpha1.WorkspaceStatus) bool {
	return st.StaleSince != nil && (ws.Status.StaleSince == nil || !ws.Status.StaleSince.Equal(st.StaleSince))
}

func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// untilStale is how long until a stopped workspace's staleness is looked at again: when it
// becomes stale, then at its deletion time, so that a call on it since is seen before the
// reaper acts; 0 when neither is ahead.
func untilStale(st infrav1alpha1.WorkspaceStatus, pol stalePolicy, now time.Time) time.Duration {
	if st.UntouchedSince == nil || pol.after <= 0 {
		return 0
	}
	next := st.UntouchedSince.Add(pol.after)
	if st.DeleteAt != nil {
		next = st.DeleteAt.Time
	}
	if !next.After(now) {
		return 0
	}
	return max(next.Sub(now), time.Second)
}

func ptrTime(t time.Time) *metav1.Time {
	mt := metav1.NewTime(t.Truncate(time.Second))
	return &mt
}

// staleReaper deletes the stale workspaces whose status.deleteAt has passed, as
// --workspace-delete-stale-after asks. It runs on the leader only.
// +kubebuilder:rbac:groups=infra.cloudspace.dev,resources=workspaces,verbs=list;watch;delete
type staleReaper struct {
	// activity is the record of calls on workspaces: one since the status said to delete is a
	// touch that status has not seen yet.
	activity *activity.Record
	reader   client.Reader
	writer   client.Writer
	recorder record.EventRecorder
	interval time.Duration
	now      func() time.Time
}

func newStaleReaper(mgr ctrl.Manager, cfg WorkspaceConfig) staleReaper {
	return staleReaper{activity: cfg.Activity, reader: mgr.GetCache(), writer: mgr.GetClient(), recorder: mgr.GetEventRecorderFor(engine.DefaultFieldManager),
		interval: cmp.Or(cfg.StaleInterval, DefaultStaleInterval), now: time.Now}
}

// reap deletes each workspace due, conditional on the version whose status said so: a
// workspace started or changed since is never deleted for what it was before.
func (r staleReaper) reap(ctx context.Context) error {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(workspaceGVK.GroupVersion().WithKind("WorkspaceList"))
	if err := r.reader.List(ctx, list); err != nil {
		return fmt.Errorf("listing workspaces: %w", err)
	}
	for i := range list.Items {
		// Only workspaces with a deletion time are decoded.
		if _, set, _ := unstructured.NestedString(list.Items[i].Object, "status", "deleteAt"); !set {
			continue
		}
		ws, err := workspace.Decode(&list.Items[i])
		if err != nil || !dueForDeletion(ws, r.now()) || r.activity.Of(ws.UID).Last.After(ws.Status.UntouchedSince.Time) {
			continue
		}
		r.delete(ctx, ws)
	}
	return nil
}

// delete deletes a stale workspace if it is still the version read, and records why.
func (r staleReaper) delete(ctx context.Context, ws *infrav1alpha1.Workspace) {
	deleteUnchanged(ctx, r.writer, r.recorder, ws, "a stale workspace",
		"Deleted: stopped and untouched until "+ws.Status.DeleteAt.UTC().Format(time.RFC3339)+", past --workspace-delete-stale-after")
}

// deleteUnchanged deletes obj, something stale, if it is still the version read (its UID and
// resourceVersion), and records why with a DeletedStale event. Gone, or changed since (started,
// taken back), it is left to the next look, which tells whether it is still stale.
func deleteUnchanged(ctx context.Context, w client.Writer, rec record.EventRecorder, obj client.Object, what, why string) {
	uid, version := obj.GetUID(), obj.GetResourceVersion()
	err := w.Delete(ctx, obj, client.Preconditions{UID: &uid, ResourceVersion: &version})
	switch {
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
	case err != nil:
		log.FromContext(ctx).Error(err, "deleting "+what, "object", client.ObjectKeyFromObject(obj))
	default:
		rec.Event(obj, corev1.EventTypeNormal, infrav1alpha1.EventDeletedStale, why)
	}
}

// dueForDeletion reports whether the workspace's status, current for its spec, says to delete
// it by now.
func dueForDeletion(ws *infrav1alpha1.Workspace, now time.Time) bool {
	return ws.DeletionTimestamp == nil && ws.Status.DeleteAt != nil && ws.Status.UntouchedSince != nil && !now.Before(ws.Status.DeleteAt.Time) &&
		ws.Status.Phase == infrav1alpha1.WorkspaceStopped && ws.Status.ObservedGeneration == ws.Generation
}
