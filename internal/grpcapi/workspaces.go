package grpcapi

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/engine"
	"github.com/cloudspace-dev/cloudspace-operator/internal/engine/objcache"
	"github.com/cloudspace-dev/cloudspace-operator/internal/workspace"
)

// ownerField selects workspaces by spec.owner: a selectable field of the CRD for reads from
// the API server, and an index of the same name in the cache.
const ownerField = "spec.owner"

// maxNameLength is a DNS label's, the Workspace's own (its Service's name): the children
// whose names add a suffix ("-home", "-access") are kinds whose names may be longer.
const maxNameLength = validation.DNS1123LabelMaxLength

var nameRE = regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?$`)

// spec is a create request in either API's terms.
type spec struct {
	name, namespace, image    string
	port                      uint32
	cpu, memory, storage, git string
	retain                    bool
	idleTimeout               time.Duration // 0: the operator's
	fields                    fields        // the caller's names of the fields, for errors
}

// fields names each spec field as the caller's message spells it, for InvalidArgument.
type fields struct {
	name, namespace, image, port, cpu, memory, storage, git, idleTimeout string
}

// workspaces is what both services share: the cluster client, the notifier and the limits.
type workspaces struct {
	// c reads through the cache (newWorkspaces).
	c client.Client
	// fresh reads around the cache, where a decision must see the latest writes (quotas).
	fresh    client.Reader
	notifier *notifier
	cfg      *settings
	// events records, on a Workspace made for its owner by another identity, who asked.
	events record.EventRecorder

	// quota takes each user's quota decisions one at a time, on every replica of the API, so
	// that two concurrent calls cannot both take the last place (quota.go).
	quota *quotaLock

	watchMu  sync.Mutex
	watching map[string]int // open Watch streams per user
}

// newWorkspaces serves workspaces that it writes with c, reads from cache, and reads around the
// cache with fresh; its Workspace reads decode each object on its own (decodingReader).
func newWorkspaces(c client.Client, cache, fresh client.Reader, n *notifier, cfg *settings, quota *quotaLock) *workspaces {
	return &workspaces{c: decodingClient{Client: c, reads: decodingReader{Reader: cache}}, fresh: decodingReader{Reader: fresh},
		notifier: n, cfg: cfg, quota: quota}
}

func invalid(field, format string, args ...any) error {
	return status.Errorf(codes.InvalidArgument, "%s: %s", field, fmt.Sprintf(format, args...))
}

// namespaceFor returns the namespace to use, or InvalidArgument when the server does not serve it.
func (w *workspaces) namespaceFor(ns, field string) (string, error) {
	if ns == "" {
		return w.cfg.servedNamespaces[0], nil
	}
	if !slices.Contains(w.cfg.servedNamespaces, ns) {
		return "", invalid(field, "namespace %q is not served; use one of %s", ns, strings.Join(w.cfg.servedNamespaces, ", "))
	}
	return ns, nil
}

func validName(name, field string) error {
	if len(name) == 0 || len(name) > maxNameLength || !nameRE.MatchString(name) {
		return invalid(field, "%q must be a lower-case DNS label starting with a letter, at most %d characters", name, maxNameLength)
	}
	return nil
}

// validate checks what only the API knows (the name it makes a resource name of, the
// namespaces it serves, quantities it must parse to build the resource), and fills the
// namespace. Every rule on the workspace itself is the CRD's, which the API server applies to
// the create; its refusal is reported in the caller's field names (invalidSpec).
func (w *workspaces) validate(sp *spec, f fields) error {
	if err := validName(sp.name, f.name); err != nil {
		return err
	}
	ns, err := w.namespaceFor(sp.namespace, f.namespace)
	if err != nil {
		return err
	}
	sp.namespace, sp.fields = ns, f
	for _, q := range []struct{ value, field string }{{sp.cpu, f.cpu}, {sp.memory, f.memory}, {sp.storage, f.storage}} {
		if _, err := resource.ParseQuantity(q.value); q.value != "" && err != nil {
			return invalid(q.field, "%q is not a quantity (like 500m, 2Gi)", q.value)
		}
	}
	return nil
}

// createError is a failed create as a gRPC status. The API server's refusal of the workspace
// is InvalidArgument with each cause under the field name of the caller's message: the rules
// are the CRD's, the names the caller's.
func createError(err error, name string, f fields) error {
	var st apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &st) || st.Status().Details == nil || len(st.Status().Details.Causes) == 0 {
		return toStatus(err, "creating workspace "+name)
	}
	names := map[string]string{"spec.image": f.image, "spec.port": f.port, "spec.resources.cpu": f.cpu,
		"spec.resources.memory": f.memory, "spec.storage.size": f.storage, "spec.git.url": f.git, "spec.idleTimeout": f.idleTimeout}
	var msgs []string
	for _, c := range st.Status().Details.Causes {
		name := names[c.Field]
		if name == "" {
			name = c.Field
		}
		msgs = append(msgs, name+": "+c.Message)
	}
	return status.Error(codes.InvalidArgument, strings.Join(msgs, "; "))
}

// object builds the Workspace for a validated spec. It carries the operator's finalizer from
// its create on: the operator would add it first thing, a write and a round trip more before
// the workspace's children are made, for every workspace the API creates.
func (sp spec) object(user string) *infrav1alpha1.Workspace {
	ws := &infrav1alpha1.Workspace{
		ObjectMeta: metav1.ObjectMeta{Name: sp.name, Namespace: sp.namespace, Labels: map[string]string{workspace.OwnerLabel: user},
			Finalizers: []string{infrav1alpha1.Finalizer}},
		Spec: infrav1alpha1.WorkspaceSpec{Owner: user, Image: sp.image, Port: int32(sp.port), Running: ptr.To(true)},
	}
	if sp.cpu != "" {
		ws.Spec.Resources.CPU = ptr.To(resource.MustParse(sp.cpu))
	}
	if sp.memory != "" {
		ws.Spec.Resources.Memory = ptr.To(resource.MustParse(sp.memory))
	}
	if sp.storage != "" {
		ws.Spec.Storage.Size = ptr.To(resource.MustParse(sp.storage))
	}
	if sp.retain {
		ws.Spec.Storage.ReclaimPolicy = infrav1alpha1.ReclaimRetain
	}
	if sp.git != "" {
		ws.Spec.Git = &infrav1alpha1.WorkspaceGit{URL: sp.git}
	}
	if sp.idleTimeout > 0 {
		ws.Spec.IdleTimeout = &metav1.Duration{Duration: sp.idleTimeout}
	}
	return ws
}

// userWorkspaces lists the user's workspaces, through r, in one namespace or all served. Only
// the user's are read: by the owner index in the cache, by field selector from the API server.
func (w *workspaces) userWorkspaces(ctx context.Context, r client.Reader, user, ns string) ([]infrav1alpha1.Workspace, error) {
	var out []infrav1alpha1.Workspace
	namespaces := w.cfg.servedNamespaces
	if ns != "" {
		namespaces = []string{ns}
	}
	for _, n := range namespaces {
		var list infrav1alpha1.WorkspaceList
		if err := r.List(ctx, &list, client.InNamespace(n), client.MatchingFields{ownerField: user}); err != nil {
			return nil, toStatus(err, "listing workspaces")
		}
		out = append(out, list.Items...)
	}
	return out, nil
}

// ownerIndex is the function of the owner index (ownerField).
func ownerIndex(o client.Object) []string {
	u, ok := objcache.AsUnstructured(o)
	if !ok {
		return nil
	}
	owner, _, _ := unstructured.NestedString(u.Object, "spec", "owner")
	if owner == "" {
		return nil
	}
	return []string{owner}
}

// watchSlot takes one of the user's Watch streams, or says ResourceExhausted when they have
// them all; release gives it back.
func (w *workspaces) watchSlot(user string) (release func(), err error) {
	w.watchMu.Lock()
	defer w.watchMu.Unlock()
	if w.watching[user] >= w.cfg.Quota.MaxWatches {
		return nil, status.Errorf(codes.ResourceExhausted, "user %s has %d Watch streams open, the most allowed", user, w.watching[user])
	}
	if w.watching == nil {
		w.watching = map[string]int{}
	}
	w.watching[user]++
	return func() {
		w.watchMu.Lock()
		defer w.watchMu.Unlock()
		if w.watching[user]--; w.watching[user] == 0 {
			delete(w.watching, user)
		}
	}, nil
}

// createRequestAnnotation marks a workspace with the create call that made it, so that a call
// that ends before it learns whether its create happened can remove its own, and only its own.
const createRequestAnnotation = "infra.cloudspace.dev/create-request"

// checkRetainedVolume refuses a name whose volume was kept from another user's workspace: the
// workspace could never start (it would not adopt the volume), and the answer does not say
// whose it is. The API server is asked, so as not to cache every volume of the cluster.
func (w *workspaces) checkRetainedVolume(ctx context.Context, user string, key types.NamespacedName) error {
	var pvcs corev1.PersistentVolumeClaimList
	err := w.fresh.List(ctx, &pvcs, client.InNamespace(key.Namespace),
		workspace.Children(key.Name))
	if err != nil {
		return toStatus(err, "checking the name "+key.Name)
	}
	for _, pvc := range pvcs.Items {
		if pvc.Annotations[engine.AnnotationRetainedFor] != "" && pvc.Labels[workspace.OwnerLabel] != user {
			return status.Errorf(codes.AlreadyExists, "the name %s is taken; choose another", key.Name)
		}
	}
	return nil
}

// create makes the workspace after checking the quota; with wait, it returns once the
// workspace is Running and deletes it again if it fails or the deadline passes first.
func (w *workspaces) create(ctx context.Context, user string, sp spec, wait bool) (*infrav1alpha1.Workspace, error) {
	ws := sp.object(user)
	request := rand.Text()
	ws.Annotations = map[string]string{createRequestAnnotation: request}
	actor := actorFrom(ctx)
	if actor != "" {
		ws.Annotations[infrav1alpha1.RequestedByAnnotation] = actor
	}
	key := types.NamespacedName{Namespace: ws.Namespace, Name: ws.Name}
	// Subscribe before creating, so that the Running event cannot be missed.
	poke, stop := w.notifier.subscribe(func(o *infrav1alpha1.Workspace) bool { return o.Namespace == key.Namespace && o.Name == key.Name })
	defer stop()
	size, err := w.admit(ctx, user, ws, sp.fields)
	if err != nil {
		return nil, err
	}
	var createErr error
	err = w.withQuota(ctx, user, key, ask{workspace: true, running: true, retained: sp.retain, storage: size}, func() error {
		createErr = w.createOutliving(ctx, ws)
		return createErr
	})
	if err != nil {
		if createErr != nil && !outcomeKnown(createErr) {
			// The API server did not answer (a timeout, a broken connection): the create may
			// have been stored all the same. Remove the workspace if this call made it.
			w.abandonRequest(key, request)
		}
		return nil, createError(err, ws.Name, sp.fields)
	}
	if actor != "" {
		w.recordRequested(ws, user, actor)
	}
	if ctx.Err() != nil {
		// Made for a caller that is gone, it would start with no one to use it.
		w.abandon(key, ws.UID, true)
		return nil, toStatus(ctx.Err(), "creating workspace "+ws.Name)
	}
	if !wait {
		return ws, nil
	}
	return w.waitRunning(ctx, key, ws.UID, poke, true)
}

// recordRequested logs and records on ws that actor created it for user.
func (w *workspaces) recordRequested(ws *infrav1alpha1.Workspace, user, actor string) {
	ctrl.Log.WithName("grpc").Info("created a workspace for a user", "workspace", ws.Namespace+"/"+ws.Name, "user", user, "requestedBy", actor)
	if w.events != nil {
		w.events.Eventf(ws, corev1.EventTypeNormal, infrav1alpha1.EventRequested, "created for %s by %s through the workspace API", user, actor)
	}
}

// outlivingTimeout bounds a write that outlives the call it serves: a create finished after
// its caller gave up (createOutliving), the removal of a workspace made for no one (abandon).
const outlivingTimeout = 10 * time.Second

// createOutliving creates ws on a context that ends outlivingTimeout after the call's does. A
// create cut off in flight may still be stored by the API server after the call has looked for
// it, and would start with no one waiting for it; a finished create says what to remove.
func (w *workspaces) createOutliving(ctx context.Context, ws *infrav1alpha1.Workspace) error {
	createCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	stop := context.AfterFunc(ctx, func() { time.AfterFunc(outlivingTimeout, cancel) })
	defer stop()
	return w.c.Create(createCtx, ws)
}

// outcomeKnown reports whether a failed create's error is the API server's refusal, which
// stored nothing, as opposed to no answer or a timeout, after which it may have stored it.
func outcomeKnown(err error) bool {
	var s apierrors.APIStatus
	return errors.As(err, &s) && !apierrors.IsTimeout(err) && !apierrors.IsServerTimeout(err)
}

// admit checks a create before the quota is counted, since these are the more useful answers:
// a taken name (a workspace, or another user's retained volume), the CRD's rules (through a
// dry run), and the operator's limits on the workspace as the dry run defaulted it. storage is
// the bytes of the volume it will claim, defaulted too, for the storage budget.
func (w *workspaces) admit(ctx context.Context, user string, ws *infrav1alpha1.Workspace, f fields) (storage int64, err error) {
	key := client.ObjectKeyFromObject(ws)
	if err := w.c.Get(ctx, key, &infrav1alpha1.Workspace{}); err == nil {
		return 0, status.Errorf(codes.AlreadyExists, "workspace %s already exists", key.Name)
	}
	// The two reads of the API server go at once (a burst of creates waits on each round
	// trip); the retained volume's answer wins, as it would have come first.
	var retained error
	var wg sync.WaitGroup
	wg.Go(func() { retained = w.checkRetainedVolume(ctx, user, key) })
	// The limits are checked on what the dry run stored: the workspace with the CRD's defaults
	// filled in, which is what the operator renders and checks. A field the call left out is
	// over a limit below its default just as one it set.
	defaulted := ws.DeepCopy()
	dryRun := w.c.Create(ctx, defaulted, client.DryRunAll)
	wg.Wait()
	if retained != nil {
		return 0, retained
	}
	if dryRun != nil {
		return 0, createError(dryRun, ws.Name, f)
	}
	if ferr := w.cfg.Limits.Check(&defaulted.Spec); ferr != nil {
		over := apierrors.NewInvalid(infrav1alpha1.GroupVersion.WithKind("Workspace").GroupKind(), ws.Name, field.ErrorList{ferr})
		return 0, createError(over, ws.Name, f)
	}
	if defaulted.Spec.Storage.Size != nil {
		storage = defaulted.Spec.Storage.Size.Value()
	}
	return storage, nil
}

// waitRunning waits until the workspace is Running, bounded by the call's deadline and the
// server's maximum. With cleanup, a workspace that fails or runs out of time is deleted, so a
// failed create leaves nothing behind.
func (w *workspaces) waitRunning(ctx context.Context, key types.NamespacedName, uid types.UID, poke <-chan struct{}, cleanup bool) (*infrav1alpha1.Workspace, error) {
	ctx, cancel := context.WithDeadline(ctx, answerBy(ctx, time.Now().Add(w.cfg.MaxWait)))
	defer cancel()
	waitedOn := "it was not created"
	for {
		var ws infrav1alpha1.Workspace
		err := w.c.Get(ctx, key, &ws)
		if err == nil {
			waitedOn = fmt.Sprintf("it was %s: %s", orUnknown(string(ws.Status.Phase)), ws.Status.Message)
		}
		switch {
		case err != nil && !apierrors.IsNotFound(err):
			return nil, toStatus(err, "reading workspace "+key.Name)
		case err == nil && ws.Status.Phase == infrav1alpha1.WorkspaceRunning:
			return &ws, nil
		case err == nil && ws.Status.Phase == infrav1alpha1.WorkspaceFailed:
			w.abandon(key, uid, cleanup)
			return nil, status.Errorf(codes.FailedPrecondition, "workspace %s failed (%s): %s", key.Name, failureReason(&ws), ws.Status.Message)
		}
		select {
		case <-poke:
		case <-ctx.Done():
			w.abandon(key, uid, cleanup)
			return nil, status.Errorf(codes.DeadlineExceeded, "workspace %s was not running before the deadline; %s", key.Name, waitedOn)
		}
	}
}

// answerMargin is how long before the caller's deadline a wait gives up, so that its answer
// (what it waited on) reaches the caller before the caller's own "context deadline exceeded".
const answerMargin = time.Second

// answerBy is when a wait that may last until limit answers: limit, or answerMargin before the
// caller's deadline (a quarter of the time left, for a deadline that close).
func answerBy(ctx context.Context, limit time.Time) time.Time {
	deadline, ok := ctx.Deadline()
	if !ok {
		return limit
	}
	deadline = deadline.Add(-min(answerMargin, time.Until(deadline)/4))
	if deadline.Before(limit) {
		return deadline
	}
	return limit
}

// orUnknown is a phase the operator has not written yet, said so.
func orUnknown(phase string) string {
	if phase == "" {
		return "not yet reconciled"
	}
	return phase
}

// failureReason is why a Failed workspace failed: its Degraded condition's reason (CrashLoop,
// ImagePullFailed, StartTimedOut…).
func failureReason(ws *infrav1alpha1.Workspace) string {
	if c := meta.FindStatusCondition(ws.Status.Conditions, infrav1alpha1.ConditionDegraded); c != nil && c.Status == metav1.ConditionTrue {
		return c.Reason
	}
	return string(infrav1alpha1.WorkspaceFailed)
}

// abandon deletes the workspace this call created and could not bring up: the one with this
// UID, never another of the same name.
func (w *workspaces) abandon(key types.NamespacedName, uid types.UID, cleanup bool) {
	if !cleanup || uid == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), outlivingTimeout)
	defer cancel()
	ws := &infrav1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	_ = w.c.Delete(ctx, ws, client.Preconditions{UID: &uid})
}

// abandonRequest deletes the workspace at key if the create call marked request made it.
func (w *workspaces) abandonRequest(key types.NamespacedName, request string) {
	ctx, cancel := context.WithTimeout(context.Background(), outlivingTimeout)
	defer cancel()
	var ws infrav1alpha1.Workspace
	if err := w.fresh.Get(ctx, key, &ws); err != nil || ws.Annotations[createRequestAnnotation] != request {
		return
	}
	w.abandon(key, ws.UID, true)
}

// owned reads a workspace and checks that the user owns it.
func (w *workspaces) owned(ctx context.Context, user, ns, name string, f fields) (*infrav1alpha1.Workspace, error) {
	return w.ownedFrom(ctx, w.c, user, ns, name, f)
}

// ownedFrom is owned, reading through r first. Another user's workspace answers exactly as a
// missing one (notFound), whatever is wrong with it: a caller cannot tell a name another user
// has from a free one, so cannot list other users' workspaces by guessing their names.
func (w *workspaces) ownedFrom(ctx context.Context, r client.Reader, user, ns, name string, f fields) (*infrav1alpha1.Workspace, error) {
	if err := validName(name, f.name); err != nil {
		return nil, err
	}
	ns, err := w.namespaceFor(ns, f.namespace)
	if err != nil {
		return nil, err
	}
	key := types.NamespacedName{Namespace: ns, Name: name}
	ws, err := w.readOwned(ctx, r, user, key)
	if (apierrors.IsNotFound(err) || errors.Is(err, errNotOwned)) && r != w.fresh {
		// The cache may lag: a workspace created a moment ago, or one of this name deleted and
		// made again by this user. Asking the API server on every such miss also makes another
		// user's name cost what a free one does, so the time taken does not tell them apart.
		ws, err = w.readOwned(ctx, w.fresh, user, key)
	}
	switch {
	case apierrors.IsNotFound(err), errors.Is(err, errNotOwned):
		return nil, notFound(name)
	case err != nil:
		return nil, toStatus(err, "reading workspace "+name)
	}
	w.cfg.Activity.Used(ws.UID, time.Now()) // a call on it is a use: it postpones an idle stop
	return ws, nil
}

// errNotOwned is a workspace read that belongs to another user.
var errNotOwned = errors.New("the workspace belongs to another user")

// readOwned reads the workspace at key through r: errNotOwned when it is another user's, even
// one that does not decode (what is wrong with it is its owner's business).
func (w *workspaces) readOwned(ctx context.Context, r client.Reader, user string, key types.NamespacedName) (*infrav1alpha1.Workspace, error) {
	var ws infrav1alpha1.Workspace
	var undecodable *undecodableError
	err := r.Get(ctx, key, &ws)
	switch {
	case errors.As(err, &undecodable) && undecodable.owner != user:
		return nil, errNotOwned
	case err != nil:
		return nil, err
	}
	if ws.Spec.Owner != user {
		return nil, errNotOwned
	}
	return &ws, nil
}

// notFound is the one answer for a name the caller has no workspace of: missing, or another
// user's.
func notFound(name string) error {
	return status.Errorf(codes.NotFound, "workspace %s not found", name)
}

// setRunning starts or stops a workspace; starting counts against the running quota. A stop
// always goes through; a start over the operator's limits (lowered since the workspace was
// made) is refused, as the operator would not render it.
func (w *workspaces) setRunning(ctx context.Context, user, ns, name string, running bool, f fields) (*infrav1alpha1.Workspace, error) {
	var quota *ask
	if running {
		quota = &ask{running: true}
	}
	return w.change(ctx, user, ns, name, f, quota, func(ws *infrav1alpha1.Workspace) (bool, error) {
		// A workspace the operator stopped (status.stoppedReason) starts again on a change to
		// its spec: the count of such starts.
		again := running && ws.StoppedByOperator()
		if ws.Spec.Running != nil && *ws.Spec.Running == running && !again {
			return false, nil
		}
		if ferr := w.cfg.Limits.Check(&ws.Spec); running && ferr != nil {
			return false, status.Errorf(codes.FailedPrecondition, "workspace %s cannot start: %v", name, ferr)
		}
		ws.Spec.Running = ptr.To(running)
		if again {
			ws.Spec.StartRequests++
		}
		return true, nil
	})
}

// change applies set to the user's workspace (set says whether it changed anything, or why it
// must not), within quota when one is given. The write is conditional on the version whose
// owner was checked: a stale read never patches a workspace deleted and recreated, by another
// user, under the same name. When the version has moved on (the operator wrote its status, say), it is read again
// from the API server, checked again, and tried again, with client-go's bounded back-off
// (4 tries over about 300 ms: a new workspace sees several operator writes in that time).
func (w *workspaces) change(ctx context.Context, user, ns, name string, f fields, quota *ask, set func(*infrav1alpha1.Workspace) (bool, error)) (*infrav1alpha1.Workspace, error) {
	var reader client.Reader = w.c
	var out *infrav1alpha1.Workspace
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		ws, err := w.ownedFrom(ctx, reader, user, ns, name, f)
		if err != nil {
			return err
		}
		reader, out = w.fresh, ws
		base := ws.DeepCopy()
		if changed, err := set(ws); !changed || err != nil {
			return err
		}
		patch := func() error {
			return w.c.Patch(ctx, ws, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
		}
		if quota != nil {
			return w.withQuota(ctx, user, client.ObjectKeyFromObject(ws), *quota, patch)
		}
		return patch()
	})
	if err != nil {
		return nil, toStatus(err, "updating workspace "+name)
	}
	return out, nil
}

func (w *workspaces) delete(ctx context.Context, user, ns, name string, f fields) error {
	ws, err := w.owned(ctx, user, ns, name, f)
	if err != nil {
		return err
	}
	uid := ws.UID
	if err := w.c.Delete(ctx, ws, client.Preconditions{UID: &uid}); err != nil {
		return toStatus(err, "deleting workspace "+name)
	}
	return nil
}

// toStatus maps an API server error onto the gRPC code that says the same.
func toStatus(err error, doing string) error {
	if _, ok := status.FromError(err); ok {
		return err // already a gRPC status
	}
	if ns, ok := missingNamespace(err); ok {
		// Not the caller's to fix: say who can.
		return status.Errorf(codes.FailedPrecondition, "%s: the namespace %s, which the API serves, does not exist: an admin must create it (README, \"After the install\")",
			doing, ns)
	}
	code := codes.Internal
	var undecodable *undecodableError
	switch {
	case errors.As(err, &undecodable):
		code = codes.FailedPrecondition
	case apierrors.IsNotFound(err):
		code = codes.NotFound
	case apierrors.IsAlreadyExists(err):
		code = codes.AlreadyExists
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err):
		code = codes.InvalidArgument
	case apierrors.IsForbidden(err):
		code = codes.PermissionDenied
	case apierrors.IsConflict(err):
		code = codes.Aborted
	case errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	case apierrors.IsTimeout(err), apierrors.IsServerTimeout(err), apierrors.IsTooManyRequests(err), apierrors.IsServiceUnavailable(err):
		code = codes.Unavailable
	}
	return status.Errorf(code, "%s: %v", doing, err)
}

// missingNamespace returns the namespace whose absence err reports.
func missingNamespace(err error) (string, bool) {
	var st apierrors.APIStatus
	if !apierrors.IsNotFound(err) || !errors.As(err, &st) {
		return "", false
	}
	if d := st.Status().Details; d != nil && d.Kind == "namespaces" {
		return d.Name, true
	}
	return "", false
}
