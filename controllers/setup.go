package controllers

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/cloudspace-dev/cloudspace-operator/internal/render"
	"github.com/cloudspace-dev/cloudspace-operator/internal/watches"
)

// Setup registers one ChartReconciler per watches.yaml entry with the manager. Every chart is
// loaded here, so a broken chart stops the operator at start rather than at the first CR.
func Setup(mgr ctrl.Manager, ws []watches.Watch, opts ...Option) error {
	cfg := defaultConfig()
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return err
		}
	}
	children, err := newChildCache(mgr, cfg.namespaces)
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
		if err := setupOne(mgr, w, cfg, children, caps); err != nil {
			return fmt.Errorf("watches entry on line %d (%s): %w", w.Line, w.GroupVersionKind(), err)
		}
	}
	return nil
}

// newChildCache is a cache of the operator's children only: every object carrying our
// managed-by label, without managedFields, so memory follows what we manage, not the cluster.
func newChildCache(mgr ctrl.Manager, namespaces []string) (cache.Cache, error) {
	opts := cache.Options{
		Scheme:               mgr.GetScheme(),
		Mapper:               mgr.GetRESTMapper(),
		DefaultLabelSelector: labels.SelectorFromSet(labels.Set{LabelManagedBy: ManagedByValue}),
		DefaultTransform:     cache.TransformStripManagedFields(),
	}
	if len(namespaces) > 0 {
		opts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range namespaces {
			opts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	c, err := cache.New(mgr.GetConfig(), opts)
	if err != nil {
		return nil, fmt.Errorf("creating the child cache: %w", err)
	}
	if err := mgr.Add(c); err != nil {
		return nil, fmt.Errorf("adding the child cache: %w", err)
	}
	return c, nil
}

func setupOne(mgr ctrl.Manager, w watches.Watch, cfg config, children cache.Cache, caps *capabilities) error {
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
	r := &ChartReconciler{
		client: mgr.GetClient(), reader: mgr.GetCache(), children: children, mapper: mgr.GetRESTMapper(),
		recorder: mgr.GetEventRecorderFor(DefaultFieldManager), caps: caps, chart: chart, lifecycle: lc,
		watch: w, gvk: w.GroupVersionKind(), selector: sel, cfg: cfg, metrics: sharedMetrics(),
		watched: map[schema.GroupVersionKind]bool{}, memo: map[types.NamespacedName]rendered{},
		written: map[types.NamespacedName]lastWrite{},
	}
	return r.SetupWithManager(mgr)
}

// SetupWithManager builds the reconciler's controller. Child kinds are watched as the chart
// renders them (ensureWatches), since only the chart knows them.
func (r *ChartReconciler) SetupWithManager(mgr ctrl.Manager) error {
	c, err := ctrl.NewControllerManagedBy(mgr).
		Named(r.name()).
		For(r.newObject(), builder.WithPredicates(
			predicate.NewPredicateFuncs(func(o client.Object) bool { return r.selector.Matches(labels.Set(o.GetLabels())) }),
			predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{},
				predicate.LabelChangedPredicate{}, deletionStarted{}),
		)).
		WithOptions(controller.Options{
			MaxConcurrentReconciles: r.watch.MaxConcurrentReconciles,
			// A reconcile blocked on a slow API call gives up and is retried, rather than
			// holding a worker forever.
			ReconciliationTimeout: r.cfg.reconcileTimeout,
		}).
		Build(r)
	if err != nil {
		return fmt.Errorf("building controller %s: %w", r.name(), err)
	}
	r.controller = c
	if _, ok := r.lifecycle.(PodObserver); ok {
		return r.watchPods()
	}
	return nil
}

// watchPods maps the chart's pods (not children: a ReplicaSet owns them) back to their
// resource by the chart-name and instance labels.
func (r *ChartReconciler) watchPods() error {
	pod := &unstructured.Unstructured{}
	pod.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "Pod"})
	toOwner := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		labels := o.GetLabels()
		if labels[LabelName] != r.chart.Name() || labels[LabelInstance] == "" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: labels[LabelInstance]}}}
	})
	if err := r.controller.Watch(source.Kind[client.Object](r.children, pod, toOwner)); err != nil {
		return fmt.Errorf("watching the pods of %s: %w", r.gvk.Kind, err)
	}
	return nil
}

// deletionStarted passes the update that sets a deletion timestamp, which does not always
// change the generation.
type deletionStarted struct{ predicate.Funcs }

func (deletionStarted) Update(e event.UpdateEvent) bool {
	return e.ObjectOld.GetDeletionTimestamp().IsZero() && !e.ObjectNew.GetDeletionTimestamp().IsZero()
}
