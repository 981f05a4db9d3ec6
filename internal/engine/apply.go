package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/engine/objcache"
)

// The applier: plan, judge, write, apply and replace (this file), prune, deleteEntries and
// deleteChild (prune.go). Every write to a child keeps these rules:
//
//   - Ownership. A child is written or deleted only if it is the resource's own: its
//     controller reference carries the resource's UID, or its AnnotationRetainedFor record names
//     the resource and the kind's Adopter approves. Anything else in a child's place is an
//     ownershipConflictError and nothing at all is written for the resource (plan checks every
//     place before write writes any).
//   - Conditional writes. Each write is conditional on what was checked: a create is an apply
//     with resourceVersion createOnly, which fails if an object appeared meanwhile; an update
//     carries the resourceVersion read; a delete carries the UID read. A write refused for that
//     reason is errConflict, and the reconcile starts again from fresh reads, never overwrites.
//   - No write without a change. A child whose spec hash and rendered fields hold is not
//     written (unchanged); a resync writes nothing.
//   - Order. Children are written in waves (waves): what others need at admission first.
//     A child refused does not hold back the others; refusals are joined, and a refusal as
//     invalid is a childInvalidError, which no retry fixes.

// ownershipConflictError says that objects the engine did not create for a resource stand
// where its chart renders children. Nothing is written for that resource until they are gone.
type ownershipConflictError struct {
	// Conflicts name each object and who holds it.
	Conflicts []string
	// Reason is the condition reason: OwnershipConflict, or an Adopter's Refusal's.
	Reason string
}

func (e *ownershipConflictError) Error() string {
	return strings.Join(e.Conflicts, "; ")
}

// errConflict means a child changed between our read and our write (we lost a write race); the
// write was refused and the reconcile is repeated from fresh reads.
var errConflict = errors.New("a child changed since it was read")

// conflictRetry is how soon a reconcile that met errConflict is repeated.
const conflictRetry = time.Second

// createOnly is the resourceVersion precondition of a server-side apply that creates a child:
// no live object has it, so the apply fails with a conflict if an object appeared meanwhile,
// instead of taking it over.
const createOnly = "1"

// step is one child's place: the rendered child and what stands there now.
type step struct {
	desired *unstructured.Unstructured
	current *unstructured.Unstructured // nil when nothing stands there
	adopt   bool                       // current was retained for an earlier resource and is taken over
}

// applyAll makes every rendered child exist as rendered, in install order, and returns the live
// children. Every child's place is checked before anything is written, so that an ownership
// conflict anywhere writes nothing for the resource.
func (r *reconciler) applyAll(ctx context.Context, s *scope, desired []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	steps, err := r.plan(ctx, s.obj, desired)
	if err != nil {
		return nil, err
	}
	return r.write(ctx, s, steps)
}

// plan reads what stands in each child's place (all at once: the reads are independent) and
// decides whether the resource may write it.
func (r *reconciler) plan(ctx context.Context, owner *unstructured.Unstructured, desired []*unstructured.Unstructured) ([]step, error) {
	steps := make([]step, len(desired))
	errs := make([]error, len(desired))
	var wg sync.WaitGroup
	for i, d := range desired {
		wg.Go(func() {
			steps[i].desired = d
			steps[i].current, errs[i] = r.lookup(ctx, d)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	conflict := &ownershipConflictError{Reason: infrav1alpha1.ReasonOwnershipConflict}
	for i := range steps {
		if steps[i].current == nil {
			continue
		}
		var why, reason string
		steps[i].adopt, why, reason = r.judge(owner, steps[i].desired, steps[i].current)
		if why != "" {
			conflict.Conflicts = append(conflict.Conflicts, why)
		}
		if reason != "" {
			conflict.Reason = reason
		}
	}
	if len(conflict.Conflicts) > 0 {
		return nil, conflict
	}
	return steps, nil
}

// judge decides whether owner may write over current, which stands in d's place: yes when it is
// owner's own, or retained for an earlier resource and adopted; otherwise it says why not, and
// the kind's own reason if its lifecycle gave one.
func (r *reconciler) judge(owner, d, current *unstructured.Unstructured) (adopt bool, why, reason string) {
	switch claimOf(current, owner) {
	case claimOwned:
		return false, "", ""
	case claimRetained:
		err := r.adopt(owner, current)
		if err == nil {
			return true, "", ""
		}
		var refusal *Refusal
		if errors.As(err, &refusal) {
			reason = refusal.Reason
		}
		return false, fmt.Sprintf("%s was kept for an earlier %s and cannot be adopted: %v", describe(d), owner.GetKind(), err), reason
	default:
		return false, fmt.Sprintf("%s already exists and is %s", describe(d), ownerOf(current)), ""
	}
}

// adopt asks the kind whether owner may take over a retained child; nil means yes.
func (r *reconciler) adopt(owner, retained *unstructured.Unstructured) error {
	a, ok := r.lifecycle.(Adopter)
	if !ok {
		return fmt.Errorf("%s does not adopt retained children", owner.GetKind())
	}
	return a.Adopt(owner, retained)
}

// lookup returns what stands in like's place: from the child cache, or, since that holds only
// objects with our label, from the API server when the cache has nothing. So an object someone
// else made is seen before we create ours, for one read per child created.
func (r *reconciler) lookup(ctx context.Context, like *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	current, err := r.getChild(ctx, like)
	if current != nil || err != nil {
		return current, err
	}
	return r.readLive(ctx, like)
}

// readLive reads what stands in like's place from the API server; nil when nothing does.
func (r *reconciler) readLive(ctx context.Context, like *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(like.GroupVersionKind())
	err := r.apiReader.Get(ctx, client.ObjectKeyFromObject(like), u)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", describe(like), err)
	}
	return u, nil
}

// getChild reads a child from the child cache; nil when the cache has none. A stub the cache
// holds for an object no live resource of ours held when it was cached is read whole from the
// API server: the object may have become ours since (owners.go; childTrim in setup.go).
func (r *reconciler) getChild(ctx context.Context, like *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	current, err := r.children.Get(ctx, like.GroupVersionKind(), client.ObjectKeyFromObject(like))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", describe(like), err)
	}
	if current == nil || !objcache.Trimmed(current) {
		return current, nil
	}
	return r.readLive(ctx, like)
}

// write applies every step whose child is missing, drifted or adopted, and returns the live
// children. Children are written in waves (waves): those of one wave at once, a wave after the
// one before it has been written. A child the API server refuses does not hold the others back
// (a stop still reaches the IDE when a volume resize is refused): every refusal is returned,
// joined. One event per reconcile names every child created, one every child updated and one
// every child adopted: a write per kind of change rather than per child.
func (r *reconciler) write(ctx context.Context, s *scope, steps []step) ([]*unstructured.Unstructured, error) {
	live := make([]*unstructured.Unstructured, 0, len(steps))
	var created, updated, adopted []string
	var refused []error
	defer func() {
		// A resource's first install is recorded by its Ready condition and inventory; an event
		// for it would be a write for every new resource.
		if !s.firstInstall {
			r.eventList(s.obj, infrav1alpha1.EventChildCreated, "Created", created)
		}
		r.eventList(s.obj, infrav1alpha1.EventChildUpdated, "Updated", updated)
		r.eventList(s.obj, infrav1alpha1.EventChildAdopted, "Adopted", adopted)
	}()
	for _, wave := range waves(steps) {
		results := make([]stepResult, len(wave))
		var wg sync.WaitGroup
		for i, st := range wave {
			wg.Go(func() { results[i] = r.writeStep(ctx, s.obj, st) })
		}
		wg.Wait()
		for i, res := range results {
			if errors.Is(res.err, errConflict) {
				return nil, res.err
			}
			if res.err != nil {
				refused = append(refused, res.err)
			}
			if res.live != nil {
				live = append(live, res.live)
			}
			switch res.change {
			case changeCreated:
				created = append(created, describe(wave[i].desired))
			case changeUpdated:
				updated = append(updated, describe(wave[i].desired))
			case changeAdopted:
				adopted = append(adopted, describe(wave[i].desired))
			}
		}
	}
	return live, refusal(refused)
}

// childInvalidError says that the API server refused children as invalid: what the chart
// rendered from the spec is itself wrong (a label value too long, a malformed field), so no
// retry can succeed until the spec changes.
type childInvalidError struct{ err error }

func (e *childInvalidError) Error() string { return e.err.Error() }
func (e *childInvalidError) Unwrap() error { return e.err }

// refusal joins the refusals of one write. When every one says the child is invalid (422), it
// is a childInvalidError; one refusal that a retry may fix (a quota, a timeout) keeps it
// retried. A 400 is not taken as invalid: an admission webhook's denial without a code is one,
// and may depend on what changes outside the spec (a policy fixed, a registry back).
func refusal(refused []error) error {
	err := errors.Join(refused...)
	if err == nil {
		return nil
	}
	for _, e := range refused {
		if !apierrors.IsInvalid(e) {
			return err
		}
	}
	return &childInvalidError{err: err}
}

// change is what writing a step did to its child.
type change int

const (
	changeNone change = iota
	changeCreated
	changeUpdated
	changeAdopted
)

// stepResult is the outcome of one step: the live child (nil when its write was refused), what
// was done to it, and the refusal.
type stepResult struct {
	live   *unstructured.Unstructured
	change change
	err    error
}

// writeStep brings one child to what the chart renders, if it is not already.
func (r *reconciler) writeStep(ctx context.Context, owner *unstructured.Unstructured, st step) stepResult {
	switch {
	case st.current != nil && !st.adopt && r.unchanged(st):
		return stepResult{live: st.current}
	case replaced(st):
		return stepResult{live: st.current, err: r.replace(ctx, owner, st.current)}
	}
	applied, err := r.apply(ctx, st)
	switch {
	case err != nil:
		return stepResult{err: err}
	case st.current == nil:
		return stepResult{live: applied, change: changeCreated}
	case st.adopt:
		return stepResult{live: applied, change: changeAdopted}
	}
	return stepResult{live: applied, change: changeUpdated}
}

// unchanged reports whether a step's live child still holds what was rendered. A child the
// cache holds typed is compared with its render as stored when the render alone differs: the
// API server, and so the cache, keeps no value its Go type omits when empty (readOnly: false),
// and no field the type does not know.
func (r *reconciler) unchanged(st step) bool {
	return upToDate(st.desired, nil, st.current) || upToDate(st.desired, r.children.AsStored(st.desired), st.current)
}

// prerequisites are the kinds whose objects others may need at admission: a pod is refused
// while its ServiceAccount is missing, and quotas, limits and RBAC apply to what comes after.
var prerequisites = map[string]bool{
	"Namespace": true, "ResourceQuota": true, "LimitRange": true, "ServiceAccount": true,
	"Role": true, "RoleBinding": true, "ClusterRole": true, "ClusterRoleBinding": true,
	"CustomResourceDefinition": true, "PriorityClass": true,
}

// waves splits steps (in install order) into the prerequisites and the rest: everything in a
// wave is independent at admission, so it is written at once, and each wave waits for the one
// before it, which keeps what Helm's install order guarantees.
func waves(steps []step) [][]step {
	var first, rest []step
	for _, st := range steps {
		if prerequisites[st.desired.GetKind()] {
			first = append(first, st)
		} else {
			rest = append(rest, st)
		}
	}
	var out [][]step
	for _, w := range [][]step{first, rest} {
		if len(w) > 0 {
			out = append(out, w)
		}
	}
	return out
}

// replaced reports whether a step's child is changed by deleting it and creating it anew.
func replaced(st step) bool {
	return st.current != nil && !st.adopt && st.desired.GetAnnotations()[AnnotationReplace] == ReplaceOnChange
}

// replace deletes a changed child that cannot be changed in place, conditional on the UID
// checked; its deletion event brings the resource back, and the next reconcile creates the
// child as rendered once it is gone. A child already going away is waited for.
func (r *reconciler) replace(ctx context.Context, owner, current *unstructured.Unstructured) error {
	if current.GetDeletionTimestamp() != nil {
		return nil
	}
	uid := current.GetUID()
	err := r.client.Delete(ctx, current, client.PropagationPolicy("Background"), client.Preconditions{UID: &uid})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return fmt.Errorf("replacing %s: %w", describe(current), errConflict)
	}
	if err != nil {
		return fmt.Errorf("deleting %s to replace it: %w", describe(current), err)
	}
	r.event(owner, false, infrav1alpha1.EventChildDeleted, "Deleted %s to create it anew: it changed and cannot be changed in place", describe(current))
	return nil
}

// apply writes one child with server-side apply, on the condition that its place still holds
// what plan saw: nothing (createOnly), or the same version of the object.
func (r *reconciler) apply(ctx context.Context, st step) (*unstructured.Unstructured, error) {
	obj := st.desired.DeepCopy()
	obj.SetResourceVersion(createOnly)
	if st.current != nil {
		obj.SetResourceVersion(st.current.GetResourceVersion())
	}
	start := time.Now()
	err := r.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(r.cfg.fieldManager), client.ForceOwnership)
	r.metrics.applySeconds.WithLabelValues(r.gvk.Kind).Observe(time.Since(start).Seconds())
	if apierrors.IsConflict(err) {
		return nil, fmt.Errorf("applying %s: %w", describe(st.desired), errConflict)
	}
	if err != nil {
		return nil, fmt.Errorf("applying %s: %w", describe(st.desired), err)
	}
	log.FromContext(ctx).V(1).Info("applied", "child", describe(st.desired))
	return obj, nil
}

// eventList records one event naming every child in names, if any.
func (r *reconciler) eventList(obj *unstructured.Unstructured, reason, verb string, names []string) {
	if len(names) > 0 {
		r.event(obj, false, reason, "%s %s", verb, strings.Join(names, ", "))
	}
}
