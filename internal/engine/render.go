package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	corev1 "k8s.io/api/core/v1"
	"strconv"
	"time"

	"helm.sh/helm/v3/pkg/chartutil"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cloudspace-dev/cloudspace-operator/internal/render"
)

// desired returns the decorated children for the CR, rendering only when an input changed:
// the values, the overrides, the chart, the cluster's capabilities, install or upgrade, or the
// CR's identity.
func (r *reconciler) desired(s *scope) ([]*unstructured.Unstructured, error) {
	values, err := r.lifecycle.Values(s.obj)
	if err != nil {
		return nil, &render.ValuesError{Err: err}
	}
	caps, capsKey, err := r.caps.Get()
	if err != nil {
		return nil, fmt.Errorf("reading cluster capabilities: %w", err)
	}
	in := render.Input{
		Name: s.obj.GetName(), Namespace: s.obj.GetNamespace(), Values: values,
		Overrides: r.watch.OverrideValues, Capabilities: caps, IsUpgrade: isUpgrade(s.obj),
	}
	inputs, err := inputsKey(in, r.chart.Digest(), capsKey, string(s.obj.GetUID()))
	if err != nil {
		return nil, err
	}
	key := client.ObjectKeyFromObject(s.obj)
	if objs, ok := r.renders.get(key, inputs); ok {
		return objs, nil
	}
	start := time.Now()
	objs, err := renderChildren(r.chart, r.lifecycle, s.obj, in, r.cfg.operandEnv)
	r.metrics.renderSeconds.WithLabelValues(r.gvk.Kind).Observe(time.Since(start).Seconds())
	if err != nil {
		return nil, err
	}
	if err := r.checkScope(s.obj, objs); err != nil {
		return nil, err
	}
	r.renders.put(key, inputs, objs)
	return objs, nil
}

// inputsKey hashes every input of a render. Capabilities are represented by their key, since
// the struct is large and its key changes whenever it does.
func inputsKey(in render.Input, parts ...string) (string, error) {
	data, err := json.Marshal([]any{in.Name, in.Namespace, in.Values, in.Overrides, strconv.FormatBool(in.IsUpgrade), parts})
	if err != nil {
		return "", fmt.Errorf("hashing values: %w", err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:16]), nil
}

// renderChildren renders the chart for owner and decorates every child: the operand env in its
// containers, labels, the owner record (a controller reference, or for the children the
// lifecycle retains the AnnotationRetainedFor annotation) and the spec hash. It reads nothing
// from the cluster.
func renderChildren(chart *render.Chart, lc Lifecycle, owner *unstructured.Unstructured, in render.Input, env []corev1.EnvVar) ([]*unstructured.Unstructured, error) {
	objs, err := chart.Render(in)
	if err != nil {
		return nil, err
	}
	keep, err := retainedOf(lc, owner, objs)
	if err != nil {
		return nil, &render.ValuesError{Err: fmt.Errorf("deciding which children outlive the resource: %w", err)}
	}
	retained := map[string]bool{}
	for _, k := range keep {
		retained[inventoryEntry(k).ID] = true
	}
	for _, o := range objs {
		if err := addOperandEnv(o, env); err != nil {
			return nil, err
		}
		if err := decorate(o, owner, chart.Name(), chart.Version(), retained[inventoryEntry(o).ID]); err != nil {
			return nil, err
		}
	}
	return objs, nil
}

// Preview renders what the engine would apply for cr with lifecycle lc, against fixed
// capabilities instead of a cluster's: the decorated children, for golden tests of a kind.
func Preview(chart *render.Chart, lc Lifecycle, cr *unstructured.Unstructured, caps *chartutil.Capabilities) ([]*unstructured.Unstructured, error) {
	values, err := lc.Values(cr)
	if err != nil {
		return nil, &render.ValuesError{Err: err}
	}
	return renderChildren(chart, lc, cr, render.Input{
		Name: cr.GetName(), Namespace: cr.GetNamespace(), Values: values, Capabilities: caps,
	}, nil)
}

// checkScope checks that every child can be owned by the CR: a namespaced kind the cluster
// knows, in the CR's namespace (owner references cannot cross namespaces).
func (r *reconciler) checkScope(owner *unstructured.Unstructured, objs []*unstructured.Unstructured) error {
	for _, o := range objs {
		mapping, err := r.mapper.RESTMapping(o.GroupVersionKind().GroupKind(), o.GroupVersionKind().Version)
		if err != nil {
			return &render.TemplateError{Err: fmt.Errorf("%s: unknown kind %s: %w", describe(o), o.GroupVersionKind(), err)}
		}
		if mapping.Scope.Name() != meta.RESTScopeNameNamespace {
			return &render.TemplateError{Err: fmt.Errorf("%s: cluster-scoped children are not supported (they cannot be owned by a namespaced resource)", describe(o))}
		}
		if o.GetNamespace() != owner.GetNamespace() {
			return &render.TemplateError{Err: fmt.Errorf("%s: namespace %q differs from the resource's %q", describe(o), o.GetNamespace(), owner.GetNamespace())}
		}
	}
	return nil
}

// isUpgrade tells the chart whether it renders an upgrade: any generation after the first, the
// spec having changed since the resource was created. It is not whether children were applied
// before, which the next reconcile would see differently: a resource left alone would have its
// children rewritten once after its install, by whichever process reconciled it next (a
// restart, a new leader).
func isUpgrade(obj client.Object) bool {
	return obj.GetGeneration() > 1
}
