package controllers

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/engine"
	"github.com/cloudspace-dev/cloudspace-operator/internal/engine/objcache"
	"github.com/cloudspace-dev/cloudspace-operator/internal/workspace"
)

// WorkspaceIngressConfig binds workspace ingress hosts to workspaces. Whoever may create a
// Workspace names its host, and an ingress controller serves a host for any namespace (with a
// certificate, when the operator's annotations ask cert-manager for one): without a binding,
// one tenant's workspace could be served at another's host.
type WorkspaceIngressConfig struct {
	// HostPattern, when set, is the only host a workspace may have: "{owner}" (spec.owner),
	// "{name}" and "{namespace}" (the workspace's) are replaced and the rest is literal, e.g.
	// "{owner}-{name}.ide.example.com". With {owner} in it, no user is served at a host made
	// for another. Empty allows any host, held by whichever workspace claimed it first.
	HostPattern string
	// Recheck is how often a workspace whose host another holds looks again, so that it gets
	// its Ingress once the holder is gone; DefaultIngressHostRecheck when zero.
	Recheck time.Duration
}

// DefaultIngressHostRecheck is how often a workspace waiting for its host looks again. The
// engine has no hook to enqueue it when the holder goes, so the waiting workspace polls: one
// cached lookup per waiting workspace per interval.
const DefaultIngressHostRecheck = 15 * time.Second

// WorkspaceHostIndex is the cache index of Workspaces by spec.ingress.host (lower case).
const WorkspaceHostIndex = "spec.ingress.host"

var (
	hostPlaceholder   = regexp.MustCompile(`\{[^}]*\}`)
	knownPlaceholders = map[string]bool{"{owner}": true, "{name}": true, "{namespace}": true}
	ingressHostPath   = field.NewPath("spec", "ingress", "host")
	_                 = engine.Lifecycle(workspaceTenancy{})
	_                 = engine.StatusReporter(workspaceTenancy{})
	_                 = engine.Retainer(workspaceTenancy{})
	_                 = engine.PodObserver(workspaceTenancy{})
	_                 = engine.Adopter(workspaceTenancy{})
)

// IndexWorkspaceHosts indexes the Workspaces of the cache by ingress host. Workspaces are
// indexed as the engine caches them (unstructured), so the index costs no second informer.
func IndexWorkspaceHosts(ctx context.Context, indexer client.FieldIndexer) error {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(workspaceGVK)
	if err := indexer.IndexField(ctx, u, WorkspaceHostIndex, workspaceHost); err != nil {
		return fmt.Errorf("indexing workspaces by ingress host: %w", err)
	}
	return nil
}

func workspaceHost(o client.Object) []string {
	u, ok := objcache.AsUnstructured(o)
	if !ok {
		return nil
	}
	host, _, _ := unstructured.NestedString(u.Object, "spec", "ingress", "host")
	if host == "" {
		return nil
	}
	return []string{strings.ToLower(host)}
}

// validate refuses a pattern with an unknown placeholder, or one that gives no host name.
func (c WorkspaceIngressConfig) validate() error {
	if c.HostPattern == "" {
		return nil
	}
	for _, p := range hostPlaceholder.FindAllString(c.HostPattern, -1) {
		if !knownPlaceholders[p] {
			return fmt.Errorf("workspace ingress host pattern %q: unknown placeholder %s (known: {owner}, {name}, {namespace})", c.HostPattern, p)
		}
	}
	if errs := validation.IsDNS1123Subdomain(c.expand("owner", "name", "namespace")); len(errs) > 0 {
		return fmt.Errorf("workspace ingress host pattern %q does not give a host name: %s", c.HostPattern, strings.Join(errs, "; "))
	}
	return nil
}

func (c WorkspaceIngressConfig) expand(owner, name, namespace string) string {
	return strings.NewReplacer("{owner}", owner, "{name}", name, "{namespace}", namespace).Replace(c.HostPattern)
}

// allows reports whether the pattern lets a workspace (owner, name, namespace) have host.
func (c WorkspaceIngressConfig) allows(owner, name, namespace, host string) bool {
	return c.HostPattern == "" || strings.EqualFold(host, c.expand(owner, name, namespace))
}

// workspaceTenancy is Workspace's lifecycle with what bounds one tenant's workspace from
// another's: its ingress host, which it must be allowed and be the first to claim, and its
// egress policy. A host refused costs the workspace its Ingress only; the IDE still runs.
type workspaceTenancy struct {
	WorkspaceLifecycle
	ingress WorkspaceIngressConfig
	// workspaces is the cache of Workspaces with WorkspaceHostIndex; nil checks the pattern only.
	workspaces client.Reader
	// egress are the charts' egress values (EgressConfig.values); nil leaves the chart's.
	egress map[string]any
}

// hostRefusal is why a workspace may not have its ingress host.
type hostRefusal struct {
	reason, message string
}

// Values are the workspace's values, with the egress policy, and without the Ingress when the
// host is refused.
func (l workspaceTenancy) Values(obj *unstructured.Unstructured) (map[string]any, error) {
	vals, err := l.WorkspaceLifecycle.Values(obj)
	if err != nil {
		return nil, err
	}
	if l.egress != nil {
		vals["egress"] = l.egress
	}
	refusal, err := l.hostRefusal(obj)
	if err != nil {
		return nil, err
	}
	if refusal != nil {
		delete(vals, "ingress")
	}
	return vals, nil
}

// Status is the workspace's status; a refused host makes it Degraded with the refusal (the
// engine reports a lifecycle's failure as ChildFailed; the message starts with the reason),
// its URL the in-cluster one, and a workspace waiting for a host held by another look again.
func (l workspaceTenancy) Status(obj *unstructured.Unstructured, observed engine.Observed) (engine.StatusResult, error) {
	res, err := l.WorkspaceLifecycle.Status(obj, observed)
	if err != nil {
		return res, err
	}
	for k, v := range l.claim(obj) {
		res.Fields[k] = v
	}
	refusal, err := l.hostRefusal(obj)
	if err != nil || refusal == nil {
		return res, err
	}
	if res.Failure == "" {
		res.FailureReason = refusal.reason
	}
	res.Failure = strings.TrimPrefix(res.Failure+"; "+refusal.message, "; ")
	if res.Fields != nil {
		port, _, _ := unstructured.NestedInt64(obj.Object, "spec", "port")
		res.Fields["url"] = fmt.Sprintf("http://%s.%s.svc:%d/", obj.GetName(), obj.GetNamespace(), orDefault(port, workspace.DefaultPort))
	}
	if refusal.reason == infrav1alpha1.ReasonIngressHostConflict {
		recheck := orDefault(l.ingress.Recheck, DefaultIngressHostRecheck)
		if res.RequeueAfter <= 0 || res.RequeueAfter > recheck {
			res.RequeueAfter = recheck
		}
	}
	return res, nil
}

// hostRefusal says why obj may not have its ingress host: the pattern refuses it, or an
// earlier workspace holds it. The message names the field but not the holder, which may be
// another tenant's.
func (l workspaceTenancy) hostRefusal(obj *unstructured.Unstructured) (*hostRefusal, error) {
	host := strings.Join(workspaceHost(obj), "")
	if host == "" {
		return nil, nil
	}
	owner, _, _ := unstructured.NestedString(obj.Object, "spec", "owner")
	if !l.ingress.allows(owner, obj.GetName(), obj.GetNamespace(), host) {
		return &hostRefusal{infrav1alpha1.ReasonIngressHostNotAllowed, fmt.Sprintf(
			"%s: %s: host %q is not allowed: the operator requires %s, here %q; the workspace runs without an Ingress",
			infrav1alpha1.ReasonIngressHostNotAllowed, ingressHostPath, host, l.ingress.HostPattern,
			l.ingress.expand(owner, obj.GetName(), obj.GetNamespace()))}, nil
	}
	if l.workspaces == nil {
		return nil, nil
	}
	holder, err := l.holder(host)
	if err != nil || holder == nil || holder.GetUID() == obj.GetUID() {
		return nil, err
	}
	return &hostRefusal{infrav1alpha1.ReasonIngressHostConflict, fmt.Sprintf(
		"%s: %s: host %q is held by another workspace that claimed it first; this one runs without an Ingress until that one is deleted or gives the host up",
		infrav1alpha1.ReasonIngressHostConflict, ingressHostPath, host)}, nil
}

// holder is the workspace that holds host: of those that claim it and that the pattern allows,
// the one that claimed it first (claimedBefore).
func (l workspaceTenancy) holder(host string) (*unstructured.Unstructured, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(workspaceGVK.GroupVersion().WithKind(workspaceGVK.Kind + "List"))
	if err := l.workspaces.List(context.Background(), list, client.MatchingFields{WorkspaceHostIndex: host}); err != nil {
		return nil, fmt.Errorf("listing the workspaces that claim host %s: %w", host, err)
	}
	var first *unstructured.Unstructured
	for i := range list.Items {
		w := &list.Items[i]
		owner, _, _ := unstructured.NestedString(w.Object, "spec", "owner")
		if !l.ingress.allows(owner, w.GetName(), w.GetNamespace(), host) {
			continue // a claim the pattern refuses holds nothing
		}
		if first == nil || claimedBefore(w, first, host) {
			first = w
		}
	}
	return first, nil
}

// claimedBefore orders claims of host by claimedAt (a claim of unknown time comes after every
// known one), then creationTimestamp (whole seconds), then UID. An older workspace moved onto
// a host makes a new claim, not an old one.
func claimedBefore(a, b *unstructured.Unstructured, host string) bool {
	ca, oka := claimedAt(a, host)
	cb, okb := claimedAt(b, host)
	switch {
	case oka != okb:
		return oka
	case oka && !ca.Equal(cb):
		return ca.Before(cb)
	}
	ta, tb := a.GetCreationTimestamp(), b.GetCreationTimestamp()
	if !ta.Equal(&tb) {
		return ta.Before(&tb)
	}
	return a.GetUID() < b.GetUID()
}

// claimedAt is when w claimed host: as its status records it; else, for a workspace whose spec
// never changed (generation 1), its creation, when it claimed the host it has had since; false
// when it is not known yet (a host set by a later change, until its status records it).
func claimedAt(w *unstructured.Unstructured, host string) (time.Time, bool) {
	claimed, _, _ := unstructured.NestedString(w.Object, "status", "ingressHost")
	since, _, _ := unstructured.NestedString(w.Object, "status", "ingressHostClaimedAt")
	if t, err := time.Parse(time.RFC3339, since); err == nil && claimed == host {
		return t, true
	}
	if w.GetGeneration() == 1 {
		return w.GetCreationTimestamp().Time, true
	}
	return time.Time{}, false
}

// claim is the ingress host obj claims and since when: the recorded time while the host is
// the one recorded, now for a new one; empty when it claims none.
func (l workspaceTenancy) claim(obj *unstructured.Unstructured) map[string]any {
	host := strings.Join(workspaceHost(obj), "")
	if host == "" {
		return nil
	}
	since, ok := claimedAt(obj, host)
	if !ok {
		since = l.now()
	}
	return map[string]any{"ingressHost": host, "ingressHostClaimedAt": since.UTC().Format(time.RFC3339)}
}
