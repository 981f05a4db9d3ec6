package controllers

import (
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/decode"
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
// own status never says. A spec that asks for more than its author may have (another user's
// Secret, a taint or a device the admin did not allow) never renders.
type GenericDaemonLifecycle struct {
	GenericDaemonConfig
}

// GenericDaemonConfig is what the operator's admin lets a GenericDaemon ask for. A daemon runs
// on every node it selects, so a toleration reaches nodes the cluster keeps apart (the control
// plane, GPU pools) and an extended resource takes a device from the node: both are the
// admin's to hand out, not the CR author's. The zero value allows no toleration and no
// resource beyond cpu, memory and ephemeral-storage.
type GenericDaemonConfig struct {
	// AllowedTolerations are the tolerations a daemon may carry: each of its tolerations must
	// be covered by one of these (same key, or none for every key; same effect, or none for
	// every effect; Exists allows any value, Equal only its own).
	AllowedTolerations []corev1.Toleration
	// AllowedExtendedResources are the resources a daemon may request or limit besides cpu,
	// memory and ephemeral-storage, e.g. nvidia.com/gpu.
	AllowedExtendedResources []corev1.ResourceName
}

// baseResources are the resources every daemon may ask for: they take no device from a node.
var baseResources = []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage}

var (
	_ engine.Lifecycle      = GenericDaemonLifecycle{}
	_ engine.StatusReporter = GenericDaemonLifecycle{}
	_ engine.PodObserver    = GenericDaemonLifecycle{}
)

// ObservesPods asks the engine for the daemon's pods.
func (GenericDaemonLifecycle) ObservesPods() {}

// Values maps the spec onto helm-charts/genericdaemon's values; a spec the admin's settings
// refuse never renders (Degraded, ValuesInvalid, and a Warning event naming the field).
func (l GenericDaemonLifecycle) Values(obj *unstructured.Unstructured) (map[string]any, error) {
	var gd infrav1alpha1.GenericDaemon
	if err := decode.FromUnstructured(obj.Object, &gd); err != nil {
		return nil, fmt.Errorf("decoding spec: %w", err)
	}
	if err := l.Check(&gd.Spec); err != nil {
		return nil, err
	}
	return runtime.DefaultUnstructuredConverter.ToUnstructured(&gd.Spec)
}

// Check returns the first field of spec that asks for more than a daemon may have, named by
// its path. A Secret is never allowed, as for a Workspace's env: whoever may create a
// GenericDaemon could otherwise read any Secret of the namespace (another user's workspace
// password, say) through the daemon's environment without the right to read Secrets. The spec
// has no envFrom and no volumes, so env is the only way a Secret could be named.
func (c GenericDaemonConfig) Check(spec *infrav1alpha1.GenericDaemonSpec) *field.Error {
	// The CRD refuses secretKeyRef since this version; a daemon stored before it may hold one.
	for i, e := range spec.Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			return field.Forbidden(field.NewPath("spec", "env").Index(i).Child("valueFrom", "secretKeyRef"),
				"a daemon may not read the namespace's Secrets")
		}
	}
	for i, t := range spec.Tolerations {
		if !slices.ContainsFunc(c.AllowedTolerations, func(a corev1.Toleration) bool { return tolerationCovers(a, t) }) {
			return field.Forbidden(field.NewPath("spec", "tolerations").Index(i), fmt.Sprintf(
				"toleration %s is not allowed by the operator (allowed: %s)", FormatToleration(t), c.allowedTolerations()))
		}
	}
	return c.checkResources(&spec.Resources)
}

// checkResources refuses any resource but the base ones and those the admin allows, and any
// claim (a claim names a device allocation the chart does not make).
func (c GenericDaemonConfig) checkResources(r *corev1.ResourceRequirements) *field.Error {
	path := field.NewPath("spec", "resources")
	if len(r.Claims) > 0 {
		return field.Forbidden(path.Child("claims"), "a daemon may not claim devices")
	}
	for _, list := range []struct {
		name string
		rl   corev1.ResourceList
	}{{"requests", r.Requests}, {"limits", r.Limits}} {
		names := make([]string, 0, len(list.rl))
		for n := range list.rl {
			names = append(names, string(n))
		}
		slices.Sort(names) // the first refused name is the same at every reconcile
		for _, n := range names {
			name := corev1.ResourceName(n)
			if !slices.Contains(baseResources, name) && !slices.Contains(c.AllowedExtendedResources, name) {
				return field.Forbidden(path.Child(list.name).Key(n), fmt.Sprintf(
					"resource %s is not allowed by the operator (allowed: %s)", n, c.allowedResources()))
			}
		}
	}
	return nil
}

// tolerationCovers reports whether allowed tolerates every taint that t tolerates.
func tolerationCovers(allowed, t corev1.Toleration) bool {
	if allowed.Key != "" && allowed.Key != t.Key {
		return false // t with no key tolerates every key: only an allowed toleration with none covers it
	}
	if allowed.Effect != "" && allowed.Effect != t.Effect {
		return false // t with no effect tolerates every effect
	}
	if allowed.Key == "" || allowed.Operator == corev1.TolerationOpExists {
		return true
	}
	return t.Operator != corev1.TolerationOpExists && t.Value == allowed.Value
}

func (c GenericDaemonConfig) allowedTolerations() string {
	if len(c.AllowedTolerations) == 0 {
		return "none"
	}
	out := make([]string, len(c.AllowedTolerations))
	for i, t := range c.AllowedTolerations {
		out[i] = FormatToleration(t)
	}
	return strings.Join(out, ", ")
}

func (c GenericDaemonConfig) allowedResources() string {
	names := make([]string, 0, len(baseResources)+len(c.AllowedExtendedResources))
	for _, n := range append(slices.Clone(baseResources), c.AllowedExtendedResources...) {
		names = append(names, string(n))
	}
	return strings.Join(names, ", ")
}

// FormatToleration writes t as ParseToleration reads it: key[=value][:effect], "*" for every key.
func FormatToleration(t corev1.Toleration) string {
	s := t.Key
	if s == "" {
		s = "*"
	}
	if t.Operator != corev1.TolerationOpExists && t.Key != "" {
		s += "=" + t.Value
	}
	if t.Effect != "" {
		s += ":" + string(t.Effect)
	}
	return s
}

// ParseToleration reads an allowed toleration from a flag: "key" (any value), "key=value",
// either with ":Effect" (NoSchedule, PreferNoSchedule, NoExecute; every effect without), or
// "*" for every key ("*:NoSchedule": every NoSchedule taint; "*" alone: every taint).
func ParseToleration(s string) (corev1.Toleration, error) {
	spec, effect, hasEffect := strings.Cut(s, ":")
	t := corev1.Toleration{Effect: corev1.TaintEffect(effect)}
	if hasEffect && !slices.Contains([]corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute}, t.Effect) {
		return t, fmt.Errorf("toleration %q: effect %q is not NoSchedule, PreferNoSchedule or NoExecute", s, effect)
	}
	key, value, hasValue := strings.Cut(spec, "=")
	switch {
	case key == "*" && !hasValue:
		t.Operator = corev1.TolerationOpExists
		return t, nil
	case hasValue:
		t.Key, t.Operator, t.Value = key, corev1.TolerationOpEqual, value
	default:
		t.Key, t.Operator = key, corev1.TolerationOpExists
	}
	if errs := validation.IsQualifiedName(key); len(errs) > 0 {
		return t, fmt.Errorf("toleration %q: key: %s", s, strings.Join(errs, "; "))
	}
	return t, nil
}

// TolerationFlag appends each value (ParseToleration) to list: a repeatable flag.
func TolerationFlag(list *[]corev1.Toleration) func(string) error {
	return func(v string) error {
		t, err := ParseToleration(v)
		if err != nil {
			return err
		}
		*list = append(*list, t)
		return nil
	}
}

// ResourceNameFlag appends each value, a resource name such as nvidia.com/gpu, to list.
func ResourceNameFlag(list *[]corev1.ResourceName) func(string) error {
	return func(v string) error {
		if errs := validation.IsQualifiedName(v); len(errs) > 0 {
			return fmt.Errorf("resource name %q: %s", v, strings.Join(errs, "; "))
		}
		*list = append(*list, corev1.ResourceName(v))
		return nil
	}
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
		}, Progress: []string{"installed", "desired"}, Failure: failure.message, FailureReason: failure.reason}, nil
	}
	return engine.StatusResult{Fields: map[string]any{"installed": int64(0), "desired": int64(0)}, Failure: failure.message, FailureReason: failure.reason}, nil
}
