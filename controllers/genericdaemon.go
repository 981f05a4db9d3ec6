package controllers

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/engine"
)

// GenericDaemon's resource and what helm-charts/genericdaemon renders. Children are written with
// server-side apply (create, patch) and never with update.
// +kubebuilder:rbac:groups=infra.cloudspace.dev,resources=genericdaemons,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=infra.cloudspace.dev,resources=genericdaemons/status,verbs=get;patch
// +kubebuilder:rbac:groups=infra.cloudspace.dev,resources=genericdaemons/finalizers,verbs=update
// +kubebuilder:rbac:groups=apps,resources=daemonsets,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=serviceaccounts,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch

// GenericDaemonLifecycle is GenericDaemon's Go code: chart values from the typed spec,
// status.installed / status.desired from the DaemonSet, and from its pods why the daemon
// fails where it does (a crash loop, an image that cannot be pulled), which the DaemonSet's
// own status never says.
type GenericDaemonLifecycle struct{ engine.ChartOnly }

var (
	_ engine.Lifecycle   = GenericDaemonLifecycle{}
	_ engine.PodObserver = GenericDaemonLifecycle{}
)

// ObservesPods asks the engine for the daemon's pods.
func (GenericDaemonLifecycle) ObservesPods() {}

// Values maps the spec onto helm-charts/genericdaemon's values.
func (GenericDaemonLifecycle) Values(obj *unstructured.Unstructured) (map[string]any, error) {
	var gd infrav1alpha1.GenericDaemon
	if err := fromUnstructured(obj.Object, &gd); err != nil {
		return nil, fmt.Errorf("decoding spec: %w", err)
	}
	return runtime.DefaultUnstructuredConverter.ToUnstructured(&gd.Spec)
}

// Status reports the DaemonSet's ready and desired node counts, and the first failing pod.
func (GenericDaemonLifecycle) Status(_ *unstructured.Unstructured, observed engine.Observed) (engine.StatusResult, error) {
	pods, err := podsOf(observed.Pods)
	if err != nil {
		return engine.StatusResult{}, err
	}
	_, failure := podProblems(pods)
	for _, c := range observed.Children {
		if c.GroupVersionKind() != appsv1.SchemeGroupVersion.WithKind("DaemonSet") {
			continue
		}
		var ds appsv1.DaemonSet
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(c.Object, &ds); err != nil {
			return engine.StatusResult{}, fmt.Errorf("decoding DaemonSet %s: %w", c.GetName(), err)
		}
		return engine.StatusResult{Fields: map[string]any{
			"installed": int64(ds.Status.NumberReady),
			"desired":   int64(ds.Status.DesiredNumberScheduled),
		}, Progress: []string{"installed", "desired"}, Failure: failure}, nil
	}
	return engine.StatusResult{Fields: map[string]any{"installed": int64(0), "desired": int64(0)}, Failure: failure}, nil
}
