package controllers

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/activity"
	"github.com/cloudspace-dev/cloudspace-operator/internal/engine"
)

// The record the operator keeps on a kept volume gone stale: when it said so, and when it will
// delete it (none when it deletes none).
const (
	AnnotationStaleSince = "infra.cloudspace.dev/stale-since"
	AnnotationDeleteAt   = "infra.cloudspace.dev/delete-at"
)

// workspaceKindKey is how a retained-for record names the Workspace kind.
var workspaceKindKey = strings.ToLower(workspaceGVK.Kind) + "." + workspaceGVK.Group

// retainedVolumes reports the volumes kept after their workspace's delete (reclaimPolicy
// Retain) that no workspace took back for --workspace-stale-after since their release: an
// annotation (AnnotationStaleSince) and a Stale event on the claim. With
// --workspace-delete-stale-after it deletes them then (AnnotationDeleteAt says when, from the
// report on), conditional on the version that said so. Only a claim whose release record the
// operator sealed (engine.SealedRelease) is looked at: anyone who may edit a claim can write a
// record on it. The notice counts from this process's own report, never from the annotation,
// which anyone may edit too; a restart reports again, so a deletion only ever moves later. It
// runs on the leader (see leaderLoop).
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=list;patch;delete
type retainedVolumes struct {
	reader     client.Reader // the API server: released claims are in no cache
	writer     client.Writer
	recorder   record.EventRecorder
	key        []byte // the operator key, which the engine seals release records with
	namespaces []string
	policy     stalePolicy
	interval   time.Duration
	now        func() time.Time
	// reported is when this process reported each stale claim, by UID.
	reported map[types.UID]time.Time
}

func newRetainedVolumes(mgr ctrl.Manager, cfg WorkspaceConfig, namespaces []string) *retainedVolumes {
	return &retainedVolumes{reader: mgr.GetAPIReader(), writer: mgr.GetClient(), recorder: mgr.GetEventRecorderFor(engine.DefaultFieldManager),
		key: cfg.AccessKey, namespaces: namespaces, policy: cfg.stale(activity.Use{}), interval: cmp.Or(cfg.StaleInterval, DefaultStaleInterval),
		now: time.Now, reported: map[types.UID]time.Time{}}
}

// sweep looks at every released workspace volume of the served namespaces (empty: all).
func (r *retainedVolumes) sweep(ctx context.Context) error {
	namespaces := r.namespaces
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	seen := map[types.UID]time.Time{}
	for _, ns := range namespaces {
		var pvcs corev1.PersistentVolumeClaimList
		err := r.reader.List(ctx, &pvcs, client.InNamespace(ns), client.MatchingLabels{engine.LabelName: "workspace", engine.LabelPartOf: "cloudspace"})
		if err != nil {
			return fmt.Errorf("listing kept volumes: %w", err)
		}
		for i := range pvcs.Items {
			if released, ok := r.releasedAt(&pvcs.Items[i]); ok {
				r.review(ctx, &pvcs.Items[i], released, seen)
			}
		}
	}
	r.reported = seen
	return nil
}

// releasedAt is when pvc, a workspace's volume, was released; ok is false for one that is not
// released (its workspace lives, or took it back) or whose release the operator did not seal.
func (r *retainedVolumes) releasedAt(pvc *corev1.PersistentVolumeClaim) (time.Time, bool) {
	if !strings.HasPrefix(pvc.Annotations[engine.AnnotationRetainedFor], workspaceKindKey+"/") || pvc.Labels[engine.LabelManagedBy] != "" ||
		len(pvc.OwnerReferences) > 0 || pvc.DeletionTimestamp != nil {
		return time.Time{}, false
	}
	return engine.SealedRelease(r.key, pvc)
}

// review reports a stale volume, or deletes it when due; seen collects the reports kept.
func (r *retainedVolumes) review(ctx context.Context, pvc *corev1.PersistentVolumeClaim, released time.Time, seen map[types.UID]time.Time) {
	now := r.now()
	var before *metav1.Time
	if at, ok := r.reported[pvc.UID]; ok {
		before = ptrTime(at)
	}
	reported, deleteAt, stale := r.policy.staleTimes(released, before, now)
	if !stale {
		return
	}
	seen[pvc.UID] = reported.Time
	switch {
	case deleteAt != nil && !now.Before(deleteAt.Time) && before != nil:
		r.delete(ctx, pvc, released)
	case !sameTime(annotationTime(pvc, AnnotationStaleSince), reported) || !sameTime(annotationTime(pvc, AnnotationDeleteAt), deleteAt):
		r.report(ctx, pvc, released, reported, deleteAt)
	}
}

// report records on the claim that it is stale, and when it will be deleted.
func (r *retainedVolumes) report(ctx context.Context, pvc *corev1.PersistentVolumeClaim, released time.Time, reported, deleteAt *metav1.Time) {
	base := pvc.DeepCopy()
	pvc.Annotations[AnnotationStaleSince] = reported.UTC().Format(time.RFC3339)
	note := fmt.Sprintf("kept since %s, when its workspace was deleted, and taken back by none", released.UTC().Format(time.RFC3339))
	if deleteAt != nil {
		pvc.Annotations[AnnotationDeleteAt] = deleteAt.UTC().Format(time.RFC3339)
		note += fmt.Sprintf("; it will be deleted at %s unless a workspace of its name and owner takes it back before", deleteAt.UTC().Format(time.RFC3339))
	} else {
		delete(pvc.Annotations, AnnotationDeleteAt)
	}
	if err := r.writer.Patch(ctx, pvc, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		log.FromContext(ctx).V(1).Info("a stale kept volume could not be marked", "persistentVolumeClaim", client.ObjectKeyFromObject(pvc), "error", err.Error())
		return
	}
	r.recorder.Event(pvc, corev1.EventTypeNormal, infrav1alpha1.EventStale, "Stale: "+note)
}

// delete deletes a stale claim if it is still the version whose record said so.
func (r *retainedVolumes) delete(ctx context.Context, pvc *corev1.PersistentVolumeClaim, released time.Time) {
	deleteUnchanged(ctx, r.writer, r.recorder, pvc, "a stale kept volume",
		"Deleted: kept since "+released.UTC().Format(time.RFC3339)+" and taken back by none, past --workspace-delete-stale-after")
}

// annotationTime is the time an annotation of obj records; nil when none is.
func annotationTime(obj metav1.Object, key string) *metav1.Time {
	t, err := time.Parse(time.RFC3339, obj.GetAnnotations()[key])
	if err != nil {
		return nil
	}
	return ptrTime(t)
}

func sameTime(a, b *metav1.Time) bool {
	return (a == nil) == (b == nil) && (a == nil || a.Equal(b))
}
