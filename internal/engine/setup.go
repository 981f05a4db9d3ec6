package engine

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/engine/objcache"
	"github.com/cloudspace-dev/cloudspace-operator/internal/namespaces"
	"github.com/cloudspace-dev/cloudspace-operator/internal/render"
	"github.com/cloudspace-dev/cloudspace-operator/internal/watches"
)

// Setup registers one reconciler per watches.yaml entry with the manager. Every chart is
// loaded here, so a broken chart stops the operator at start rather than at the first CR.
func Setup(mgr ctrl.Manager, ws []watches.Watch, opts ...Option) error {
	cfg := defaultConfig()
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return err
		}
	}
	held := newOwners(clientgoscheme.Scheme)
	tracked, err := held.track(mgr, ws)
	if err != nil {
		return err
	}
	childCache, err := newChildCache(mgr, cfg.namespaces, held, tracked)
	if err != nil {
		return err
	}
	dcfg := rest.CopyConfig(mgr.GetConfig())
	dcfg.Timeout = 30 * time.Second
	dc, err := discovery.NewDiscoveryClientForConfig(dcfg)
	if err != nil {
		return fmt.Errorf("creating discovery client: %w", err)
	}
	caps := newCapabilities(dc, cfg.capabilitiesTTL)
	for _, w := range ws {
		if err := setupOne(mgr, w, cfg, childCache, caps, held); err != nil {
			return fmt.Errorf("watches entry on line %d (%s): %w", w.Line, w.GroupVersionKind(), err)
		}
	}
	return nil
}

// newChildCache is a cache of the operator's children: every object carrying our managed-by
// label, whole only when a live resource we serve holds it (anyone may set the label on their
// own objects), so memory follows what we manage, not what others label (owners.go).
func newChildCache(mgr ctrl.Manager, watched []string, held *owners, tracked func() bool) (cache.Cache, error) {
	opts := cache.Options{
		Scheme:               mgr.GetScheme(),
		Mapper:               mgr.GetRESTMapper(),
		DefaultLabelSelector: labels.SelectorFromSet(labels.Set{LabelManagedBy: ManagedByValue}),
		DefaultTransform:     objcache.CompactFor(childTrim.Transform(held.holds), childReadable),
		DefaultNamespaces:    namespaces.CacheConfigs(watched),
	}
	c, err := cache.New(mgr.GetConfig(), opts)
	if err != nil {
		return nil, fmt.Errorf("creating the child cache: %w", err)
	}
	if err := mgr.Add(startAfter{Cache: c, ready: tracked}); err != nil {
		return nil, fmt.Errorf("adding the child cache: %w", err)
	}
	return c, nil
}

// childTrim is what the child cache keeps of an object no live resource of ours holds: the
// labels the engine selects and maps on, and the retained-for record, so that its stub still
// says who holds it. Such an object is read from the API server whenever the engine needs more
// (getChild).
var childTrim = objcache.Trim{
	Labels:      []string{LabelManagedBy, LabelName, LabelInstance, LabelPartOf, LabelVersion},
	Annotations: []string{AnnotationRetainedFor},
}

// childReadable is what the child cache's readers need of its objects' metadata: the
// annotations its event handlers map on (toOwner) and that mark stubs, and the labels of pods,
// which are selected and mapped on by label (watchPods, reconciler.pods). The rest, such as a
// child's spec hash, is read from whole objects only: a label selector on another kind in this
// cache would match nothing until that kind is added here.
var childReadable = objcache.Readable{
	Annotation: func(key string) bool { return key == AnnotationRetainedFor || key == objcache.AnnotationTrimmed },
	Labels:     func(obj any) bool { _, pod := obj.(*corev1.Pod); return pod },
}

// startAfter starts a cache once ready says so: the child cache, once the owner record holds
// every resource the manager's cache listed, so that no child of theirs is first cached as a
// stub (and read from the API server until it next changes).
type startAfter struct {
	cache.Cache
	ready func() bool
}

func (s startAfter) Start(ctx context.Context) error {
	if !toolscache.WaitForCacheSync(ctx.Done(), s.ready) {
		return fmt.Errorf("the child cache's owner record never synced: %w", ctx.Err())
	}
	return s.Cache.Start(ctx)
}

func setupOne(mgr ctrl.Manager, w watches.Watch, cfg config, childCache cache.Cache, caps *capabilities, held *owners) error {
	chart, err := render.Load(w.Chart)
	if err != nil {
		return err
	}
	sel, err := w.LabelSelector()
	if err != nil {
		return err
	}
	lc := cfg.lifecycles[w.GroupVersionKind()]
	if lc == nil {
		lc = ChartOnly{}
	}
	r := &reconciler{
		client: mgr.GetClient(), apiReader: mgr.GetAPIReader(), mapper: mgr.GetRESTMapper(),
		resources: objcache.Store{Cache: mgr.GetCache()}, children: objcache.Store{Cache: childCache, Scheme: clientgoscheme.Scheme},
		recorder: mgr.GetEventRecorderFor(cfg.fieldManager), caps: caps, chart: chart,
		lifecycle: lc, watch: w, gvk: w.GroupVersionKind(), selector: sel, shard: shardOf(sel), cfg: cfg, metrics: sharedMetrics(),
		watched: map[schema.GroupVersionKind]bool{}, recovery: newRecovery(), owners: held,
		status: newStatusWriter(mgr.GetClient(), cfg),
	}
	r.metrics.startCounting(r.gvk.Kind)
	return r.SetupWithManager(mgr)
}

// SetupWithManager builds the reconciler's controller. Child kinds are watched as the chart
// renders them (ensureWatches), since only the chart knows them.
func (r *reconciler) SetupWithManager(mgr ctrl.Manager) error {
	c, err := ctrl.NewControllerManagedBy(mgr).
		Named(r.name()).
		For(r.resources.Object(r.gvk), builder.WithPredicates(
			// A resource that leaves the selector, served by us, still passes: its reconcile
			// forgets it, and its deletion tears it down.
			predicate.NewPredicateFuncs(func(o client.Object) bool {
				return r.selector.Matches(labels.Set(o.GetLabels())) || r.claimed(o)
			}),
			predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{},
				predicate.LabelChangedPredicate{}, deletionStarted{}, finalizerRemoved{}),
		)).
		WatchesRawSource(r.recovery.source()).
		WithOptions(controller.Options{
			MaxConcurrentReconciles: r.watch.MaxConcurrentReconciles,
			RateLimiter:             rateLimiter(r.cfg.maxRetryDelay),
			// A reconcile blocked on a slow API call gives up and is retried, rather than
			// holding a worker forever.
			ReconciliationTimeout: r.cfg.reconcileTimeout,
		}).
		Build(r)
	if err != nil {
		return fmt.Errorf("building controller %s: %w", r.name(), err)
	}
	r.controller = c
	if err := r.dropCaughtUpStatus(mgr); err != nil {
		return err
	}
	if _, ok := r.lifecycle.(PodObserver); ok {
		return r.watchPods()
	}
	return nil
}

// dropCaughtUpStatus lets the write memo forget each status the cache has caught up with.
func (r *reconciler) dropCaughtUpStatus(mgr ctrl.Manager) error {
	inf, err := mgr.GetCache().GetInformer(context.Background(), r.resources.Object(r.gvk))
	if err != nil {
		return fmt.Errorf("watching %s for the write memo: %w", r.gvk.Kind, err)
	}
	caughtUp := func(obj any) {
		if u, ok := objcache.AsUnstructured(obj); ok {
			r.status.memo.caughtUp(u)
		}
	}
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    caughtUp,
		UpdateFunc: func(_, obj any) { caughtUp(obj) },
	})
	if err != nil {
		return fmt.Errorf("handling %s events for the write memo: %w", r.gvk.Kind, err)
	}
	return nil
}

// watchPods maps the chart's pods (not children: a ReplicaSet owns them) back to their
// resource by the chart-name and instance labels.
func (r *reconciler) watchPods() error {
	toOwner := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		labels := o.GetLabels()
		if labels[LabelName] != r.chart.Name() || labels[LabelInstance] == "" {
			return nil
		}
		if w, ok := r.lifecycle.(PodWatcher); ok {
			w.PodChanged(objcache.Whole(o))
		}
		return request(o.GetNamespace(), labels[LabelInstance])
	})
	if err := r.controller.Watch(r.children.Source(podGVK, toOwner)); err != nil {
		return fmt.Errorf("watching the pods of %s: %w", r.gvk.Kind, err)
	}
	return nil
}

// ensureWatches starts a watch on every child kind not yet watched, so that a child edited or
// deleted by hand is put back at once.
func (r *reconciler) ensureWatches(objs []*unstructured.Unstructured) error {
	if !r.watch.WatchesDependents() {
		return nil
	}
	r.watchMu.Lock()
	defer r.watchMu.Unlock()
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		if r.watched[gvk] {
			continue
		}
		if err := r.controller.Watch(r.children.Source(gvk, handler.EnqueueRequestsFromMapFunc(r.toOwner))); err != nil {
			return fmt.Errorf("watching %s: %w", gvk, err)
		}
		r.watched[gvk] = true
	}
	return nil
}

// toOwner maps a child to the resource it belongs to: its controller when that is of our kind,
// or the resource a retained child names.
func (r *reconciler) toOwner(_ context.Context, o client.Object) []reconcile.Request {
	if ref := metav1.GetControllerOfNoCopy(o); ref != nil {
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		if err != nil || gv.Group != r.gvk.Group || ref.Kind != r.gvk.Kind {
			return nil
		}
		return request(o.GetNamespace(), ref.Name)
	}
	if kind, name, _, ok := parseRetainedFor(o.GetAnnotations()[AnnotationRetainedFor]); ok && kind == r.name() {
		return request(o.GetNamespace(), name)
	}
	return nil
}

func request(namespace, name string) []reconcile.Request {
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: namespace, Name: name}}}
}

// deletionStarted passes the update that sets a deletion timestamp, which does not always
// change the generation.
type deletionStarted struct{ predicate.Funcs }

func (deletionStarted) Update(e event.UpdateEvent) bool {
	return e.ObjectOld.GetDeletionTimestamp().IsZero() && !e.ObjectNew.GetDeletionTimestamp().IsZero()
}

// finalizerRemoved passes the update that takes our finalizer off a live resource, so that it
// is put back before anything can delete the resource without its teardown.
type finalizerRemoved struct{ predicate.Funcs }

func (finalizerRemoved) Update(e event.UpdateEvent) bool {
	return controllerutil.ContainsFinalizer(e.ObjectOld, infrav1alpha1.Finalizer) &&
		!controllerutil.ContainsFinalizer(e.ObjectNew, infrav1alpha1.Finalizer) &&
		e.ObjectNew.GetDeletionTimestamp().IsZero()
}
