// Package controllers holds the hybrid engine: one generic reconciler per watches.yaml entry that
// renders the entry's chart and applies, prunes, watches and tears down the children, and the Go
// lifecycle code that kinds register with it.
package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/render"
	"github.com/cloudspace-dev/cloudspace-operator/internal/watches"
)

// The operator applies whatever its charts render; these are the kinds its own charts use.
// Children are written with server-side apply (create, patch) and never with update.
// +kubebuilder:rbac:groups=infra.cloudspace.dev,resources=genericdaemons;workspaces,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=infra.cloudspace.dev,resources=genericdaemons/status;workspaces/status,verbs=get;patch
// +kubebuilder:rbac:groups=infra.cloudspace.dev,resources=genericdaemons/finalizers;workspaces/finalizers,verbs=update
// +kubebuilder:rbac:groups=apps,resources=daemonsets;deployments,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=serviceaccounts;services;persistentvolumeclaims,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies;ingresses,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// ChartReconciler serves one watches.yaml entry: it renders the entry's chart for each custom
// resource and owns the children's lifecycle.
type ChartReconciler struct {
	client    client.Client // writes, and reads that must not be stale
	reader    client.Reader // the manager's cache: the custom resources
	children  cache.Cache   // a cache of the operator's children only (label-selected)
	mapper    meta.RESTMapper
	recorder  record.EventRecorder
	caps      *capabilities
	chart     *render.Chart
	lifecycle Lifecycle
	watch     watches.Watch
	gvk       schema.GroupVersionKind
	selector  labels.Selector
	cfg       config
	metrics   *engineMetrics

	controller controller.Controller
	watchMu    sync.Mutex
	watched    map[schema.GroupVersionKind]bool

	memoMu sync.Mutex
	memo   map[types.NamespacedName]rendered
	// written is what was last written for each CR. The cache can lag behind our own writes;
	// this keeps a stale read from writing the same thing twice.
	written map[types.NamespacedName]lastWrite
}

// lastWrite is what the reconciler last wrote for one CR (dropped when the CR is gone).
type lastWrite struct {
	uid       types.UID
	status    any // the status as written
	at        time.Time
	finalizer bool // the finalizer was added
}

// rendered remembers a CR's last render, so an unchanged CR is never rendered twice.
type rendered struct {
	inputs  string
	objects []*unstructured.Unstructured
}

// scope is what one reconcile of one custom resource works on.
type scope struct {
	obj      *unstructured.Unstructured
	status   engineStatus
	extra    map[string]any
	progress []string // the extra fields that only count progress
	outcome  outcome
	released bool          // the finalizer is gone: the object may be too, so skip the status patch
	deferred time.Duration // a progress-only status write was put off by this long
}

func (r *ChartReconciler) newObject() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(r.gvk)
	return u
}

// Reconcile brings one custom resource's children to what its chart renders.
func (r *ChartReconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	start := time.Now()
	defer func() {
		log.FromContext(ctx).V(1).Info("reconciled", "duration", time.Since(start).String(), "requeueAfter", res.RequeueAfter.String(), "error", retErr)
	}()
	obj := r.newObject()
	if err := r.reader.Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("getting %s %s: %w", r.gvk.Kind, req, err)
	}
	if !r.selector.Matches(labels.Set(obj.GetLabels())) {
		return ctrl.Result{}, nil
	}
	if err := r.overlayLastStatus(obj); err != nil {
		return ctrl.Result{}, err
	}
	deleting := !obj.GetDeletionTimestamp().IsZero()
	if !deleting && !controllerutil.ContainsFinalizer(obj, infrav1alpha1.Finalizer) && !r.lastWrite(obj).finalizer {
		if err := r.addFinalizer(ctx, obj); err != nil {
			return ctrl.Result{}, err
		}
	}
	s, err := newScope(obj)
	if err != nil {
		return ctrl.Result{}, err
	}
	base := obj.DeepCopy()
	defer func() {
		if err := r.patchStatus(ctx, base, s); err != nil {
			retErr = errors.Join(retErr, err)
		}
		res.RequeueAfter = minPositive(res.RequeueAfter, s.deferred)
	}()
	switch {
	case deleting:
		return r.reconcileDelete(ctx, s)
	case obj.GetAnnotations()[infrav1alpha1.PauseAnnotation] == "true":
		s.outcome.paused = true
		return ctrl.Result{}, nil
	default:
		return r.reconcileNormal(ctx, s)
	}
}

func newScope(obj *unstructured.Unstructured) (*scope, error) {
	st, err := readStatus(obj)
	if err != nil {
		return nil, fmt.Errorf("reading the status of %s %s: %w", obj.GetKind(), obj.GetName(), err)
	}
	return &scope{obj: obj, status: st, outcome: outcome{generation: obj.GetGeneration()}}, nil
}

func (r *ChartReconciler) addFinalizer(ctx context.Context, obj *unstructured.Unstructured) error {
	base := obj.DeepCopy()
	controllerutil.AddFinalizer(obj, infrav1alpha1.Finalizer)
	if err := r.client.Patch(ctx, obj, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("adding the finalizer: %w", err)
	}
	r.recordWrite(obj, func(w *lastWrite) { w.finalizer = true })
	return nil
}

// overlayLastStatus puts the status this reconciler last wrote onto obj. The operator is the
// status's only writer, so that is what the server has even when the cache has not caught up;
// computing from it, and patching against it, never repeats or undoes a write.
func (r *ChartReconciler) overlayLastStatus(obj *unstructured.Unstructured) error {
	last := r.lastWrite(obj)
	if last.status == nil {
		return nil
	}
	if err := unstructured.SetNestedField(obj.Object, runtime.DeepCopyJSONValue(last.status), "status"); err != nil {
		return fmt.Errorf("restoring the last written status: %w", err)
	}
	return nil
}

// lastWrite returns what was last written for obj (nothing if obj is a new incarnation).
func (r *ChartReconciler) lastWrite(obj *unstructured.Unstructured) lastWrite {
	r.memoMu.Lock()
	defer r.memoMu.Unlock()
	w := r.written[client.ObjectKeyFromObject(obj)]
	if w.uid != obj.GetUID() {
		return lastWrite{}
	}
	return w
}

func (r *ChartReconciler) recordWrite(obj *unstructured.Unstructured, update func(*lastWrite)) {
	r.memoMu.Lock()
	defer r.memoMu.Unlock()
	key := client.ObjectKeyFromObject(obj)
	w := r.written[key]
	if w.uid != obj.GetUID() {
		w = lastWrite{uid: obj.GetUID()}
	}
	update(&w)
	r.written[key] = w
}

// patchStatus writes the scope's status in one patch, and only when it changed.
func (r *ChartReconciler) patchStatus(ctx context.Context, base *unstructured.Unstructured, s *scope) error {
	if s.released {
		return nil
	}
	setConditions(&s.status.Conditions, s.outcome)
	r.metrics.observeConditions(r.gvk.Kind, client.ObjectKeyFromObject(s.obj), s.status.Conditions)
	if err := writeStatus(s.obj, s.status, s.extra); err != nil {
		return fmt.Errorf("building status: %w", err)
	}
	status, _, _ := unstructured.NestedFieldCopy(s.obj.Object, "status")
	if equalStatus(base, s.obj) {
		return nil
	}
	last := r.lastWrite(s.obj)
	if progressOnly(base, s.obj, s.progress) && !last.at.IsZero() {
		if wait := r.cfg.statusInterval - time.Since(last.at); wait > 0 {
			s.deferred = wait
			return nil
		}
	}
	if err := r.client.Status().Patch(ctx, s.obj, client.MergeFrom(base)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("patching status: %w", err)
	}
	r.recordWrite(s.obj, func(w *lastWrite) { w.status, w.at = status, time.Now() })
	return nil
}

// event records an event on the custom resource.
func (r *ChartReconciler) event(obj *unstructured.Unstructured, warning bool, reason, format string, args ...any) {
	kind := "Normal"
	if warning {
		kind = "Warning"
	}
	r.recorder.Eventf(obj, kind, reason, format, args...)
}

func (r *ChartReconciler) forget(key types.NamespacedName) {
	r.memoMu.Lock()
	delete(r.memo, key)
	delete(r.written, key)
	r.memoMu.Unlock()
	r.metrics.forget(r.gvk.Kind, key)
}

// name is the controller's name: the kind and group, e.g. "genericdaemon.infra.cloudspace.dev".
func (r *ChartReconciler) name() string {
	return strings.ToLower(r.gvk.Kind) + "." + r.gvk.Group
}
