package controllers

import (
	"cmp"
	"errors"
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/access"
	"github.com/cloudspace-dev/cloudspace-operator/internal/activity"
	"github.com/cloudspace-dev/cloudspace-operator/internal/engine"
	"github.com/cloudspace-dev/cloudspace-operator/internal/workspace"
)

// Workspace's resource, what helm-charts/workspace renders, and the IDE pods it observes.
// +kubebuilder:rbac:groups=infra.cloudspace.dev,resources=workspaces,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=infra.cloudspace.dev,resources=workspaces/status,verbs=get;patch
// +kubebuilder:rbac:groups=infra.cloudspace.dev,resources=workspaces/finalizers,verbs=update
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=services;persistentvolumeclaims;secrets,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies;ingresses,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch

// WorkspaceLifecycle is Workspace's Go code: values from the typed spec; phase, node, address
// and URL from the IDE pod, with the start timeout; and the storage kept on delete when the
// reclaim policy says Retain, adopted later only by a workspace of the same name and owner.
type WorkspaceLifecycle struct {
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	WorkspaceConfig
}

// WorkspaceConfig is what the operator's flags set for every workspace.
type WorkspaceConfig struct {
	// Limits are the most a workspace may ask for; workspace.DefaultLimits where zero.
	Limits workspace.Limits
	// AccessKey derives each IDE's password (internal/access). Required: without it no
	// workspace renders, rather than one with a guessable password.
	AccessKey []byte
	// AccessKeySecret is the namespace/name of the Secret AccessKey is read from, or created
	// in with a random key, before the manager starts.
	AccessKeySecret string
	// IngressAnnotations are set on every workspace Ingress, e.g. cert-manager's
	// cert-manager.io/cluster-issuer so that the TLS Secret is issued by itself.
	IngressAnnotations map[string]string
	// IngressControllerNamespaces are where the ingress controller runs: each workspace's
	// NetworkPolicy admits them to a workspace with an Ingress. When empty, it admits the
	// namespaces labelled with the access label instead (infra.cloudspace.dev/workspace-access).
	IngressControllerNamespaces []string
	// IDEImage, when set, runs in place of the default IDE image, which the CRD fills in for a
	// workspace that names none: a mirror of it (OLM's RELATED_IMAGE_WORKSPACE_IDE).
	IDEImage string
	// MaxFailedStarts is how many times the IDE may exit before it is first ready, in one
	// start, before the operator stops the workspace (status.stoppedReason StartFailed); 0
	// never stops one. DefaultMaxFailedStarts by the operator's flags.
	MaxFailedStarts int
	// IdleTimeout stops a workspace unused this long, its storage kept (status.stoppedReason
	// Idle); 0 stops only those whose spec.idleTimeout asks, and a spec may ask for less than
	// IdleTimeout, never more.
	IdleTimeout time.Duration
	// IdleWarning is how long before an idle stop status.idleStopAt says it is coming (at most
	// half the timeout). DefaultIdleWarning by the operator's flags.
	IdleWarning time.Duration
	// Activity is the record of each workspace's use that the idle policy reads, written by
	// the operator's probe of the IDEs and by the workspace API; nil: no idle stop.
	Activity *activity.Record
	// OperatorNamespace is where the operator runs (POD_NAMESPACE): its manager pod, which
	// reads each IDE's activity, is admitted by the workspace NetworkPolicy. Empty: none is.
	OperatorNamespace string
	// ActivityInterval is how often each running IDE's activity is read, when an idle timeout
	// applies to it; DefaultActivityInterval when 0.
	ActivityInterval time.Duration
	// StaleAfter reports a workspace stopped and untouched this long as stale
	// (status.staleSince, an event), and a volume kept after delete that no workspace took back
	// this long since its release (AnnotationStaleSince, an event); 0 reports none.
	StaleAfter time.Duration
	// DeleteStaleAfter deletes a workspace stopped and untouched this long, reported stale
	// since StaleAfter (status.deleteAt says when), and a kept volume taken back by none this
	// long (AnnotationDeleteAt); 0 deletes none. It must exceed StaleAfter: the gap is the
	// notice its owner gets.
	DeleteStaleAfter time.Duration
	// StaleInterval is how often stale workspaces due for deletion, and kept volumes, are
	// looked at; DefaultStaleInterval when 0.
	StaleInterval time.Duration
	// IDEAuth is who the IDEs trust: their own password (IDEAuthPassword, the default) or the
	// web gateway in front of them (IDEAuthGateway).
	IDEAuth IDEAuth
}

// IDEAuth is who a workspace's IDE trusts to let a browser in.
type IDEAuth string

const (
	// IDEAuthPassword: the IDE asks for the workspace's own password, which the workspace API
	// hands to its owner only.
	IDEAuthPassword IDEAuth = "password"
	// IDEAuthGateway: the IDE asks for nothing (code-server --auth none) and trusts whoever
	// reaches it, as the cloud-IDE tutorial's IDEs trusted its gateway. Its NetworkPolicy then
	// admits only the gateway's pods (the access label) and the operator's, and a workspace
	// with an Ingress, which would open it to anyone, never renders.
	IDEAuthGateway IDEAuth = "gateway"
)

// stale is the stale policy for the workspace whose use is known as use.
func (c WorkspaceConfig) stale(use activity.Use) stalePolicy {
	return stalePolicy{after: c.StaleAfter, deleteAfter: c.DeleteStaleAfter, use: use}
}

// idle is the idle policy for the workspace whose use is known as use.
func (c WorkspaceConfig) idle(use activity.Use) idlePolicy {
	return idlePolicy{timeout: c.IdleTimeout, warning: c.IdleWarning, interval: c.ActivityInterval, use: use}
}

// DefaultMaxFailedStarts is the failed starts after which a workspace is stopped: with the
// kubelet's back-off (10 s, doubling), about 70 s of a crash loop.
const DefaultMaxFailedStarts = 3

var (
	_ engine.Lifecycle      = WorkspaceLifecycle{}
	_ engine.StatusReporter = WorkspaceLifecycle{}
	_ engine.Retainer       = WorkspaceLifecycle{}
	_ engine.PodObserver    = WorkspaceLifecycle{}
	_ engine.NodeObserver   = WorkspaceLifecycle{}
	_ engine.Adopter        = WorkspaceLifecycle{}
)

// ObservesPods asks the engine for the IDE pods.
func (WorkspaceLifecycle) ObservesPods() {}

// ObservesNodes: a lost node, or a cordoned one holding the volume, says why the pod does not
// run (nodeProblem).
func (WorkspaceLifecycle) ObservesNodes() {}

func (l WorkspaceLifecycle) now() time.Time {
	if l.Now != nil {
		return l.Now()
	}
	return time.Now()
}

// Values maps the spec onto helm-charts/workspace's values; a spec over the limits never
// renders, whoever made it.
func (l WorkspaceLifecycle) Values(obj *unstructured.Unstructured) (map[string]any, error) {
	ws, err := workspace.Decode(obj)
	if err != nil {
		return nil, err
	}
	if err := l.checkLimits(ws); err != nil {
		return nil, err
	}
	if len(l.AccessKey) < access.KeyBytes {
		return nil, errors.New("the operator has no access key to derive the IDE password from")
	}
	s := ws.Spec
	vals := map[string]any{
		"owner":   s.Owner,
		"image":   l.image(s.Image),
		"port":    int64(orDefault(s.Port, workspace.DefaultPort)),
		"running": ws.Runs(),
		// The startup probe gives the IDE as long as the status does before it says Failed.
		"startTimeoutSeconds": int64(math.Ceil(startTimeout(ws).Seconds())),
		"resources": map[string]any{
			"cpu":    quantityOr(s.Resources.CPU, workspace.DefaultCPU),
			"memory": quantityOr(s.Resources.Memory, workspace.DefaultMemory),
		},
		"storage": map[string]any{"size": quantityOr(s.Storage.Size, workspace.DefaultStorage), "storageClassName": deref(s.Storage.StorageClassName)},
		"access": map[string]any{"mode": string(cmp.Or(l.IDEAuth, IDEAuthPassword)),
			"password": access.Password(l.AccessKey, ws.UID, s.Access.Rotation)},
	}
	if l.IDEAuth == IDEAuthGateway && s.Ingress != nil {
		return nil, field.Forbidden(field.NewPath("spec", "ingress"),
			"the operator's IDEs trust the web gateway and ask no password (--workspace-ide-auth=gateway): an Ingress would let anyone in; reach the IDE through the gateway")
	}
	if l.Activity != nil && l.OperatorNamespace != "" {
		vals["activityReader"] = l.OperatorNamespace
	}
	if s.Git != nil {
		vals["git"] = map[string]any{"url": s.Git.URL, "ref": s.Git.Ref}
	}
	if s.Ingress != nil {
		vals["ingress"] = map[string]any{"host": s.Ingress.Host, "className": deref(s.Ingress.ClassName),
			"tlsSecretName": orDefault(s.Ingress.TLSSecretName, ws.Name+"-tls"), "annotations": stringMap(l.IngressAnnotations),
			"controllerNamespaces": stringList(l.IngressControllerNamespaces)}
	}
	if len(s.Env) > 0 {
		env, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&struct {
			Env []corev1.EnvVar `json:"env"`
		}{s.Env})
		if err != nil {
			return nil, err
		}
		vals["env"] = env["env"]
	}
	return vals, nil
}

// checkLimits refuses a spec over the limits, but never a render that takes no more than the
// workspace already holds. A stop renders whatever limit was lowered since the IDE started: a
// stopped IDE takes no CPU or memory, and a refused render would leave it running. The
// generation the operator has already rendered renders again as it is, so that lowering a
// limit neither changes nor stops what runs, nor wipes its status (a refused render reports no
// phase, and the quota must go on counting it as running); any change to the spec (a start, a
// larger size) is checked.
func (l WorkspaceLifecycle) checkLimits(ws *infrav1alpha1.Workspace) error {
	if engine.Rendered(ws.Generation, ws.Status.ObservedGeneration, ws.Status.Conditions) {
		return nil
	}
	check := l.Limits.Check
	if !ws.Spec.WantsRunning() {
		check = l.Limits.CheckStopped
	}
	if ferr := check(&ws.Spec); ferr != nil {
		return ferr // only when set: a nil *field.Error is not a nil error
	}
	return nil
}

// image is the IDE image to run for spec.image: the configured mirror of the default image
// in its place.
func (l WorkspaceLifecycle) image(spec string) string {
	image := orDefault(spec, workspace.DefaultImage)
	if image == workspace.DefaultImage && l.IDEImage != "" {
		return l.IDEImage
	}
	return image
}

// stringMap is m as chart values (which hold no typed maps).
func stringMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// stringList is l as chart values, which hold []any.
func stringList(l []string) []any {
	out := make([]any, len(l))
	for i, v := range l {
		out[i] = v
	}
	return out
}

func orDefault[T comparable](v, d T) T {
	var zero T
	if v == zero {
		return d
	}
	return v
}

func quantityOr(q *resource.Quantity, d string) string {
	if q == nil || q.IsZero() {
		return d
	}
	return q.String()
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// Retain keeps the home volume when the reclaim policy is Retain.
func (WorkspaceLifecycle) Retain(obj *unstructured.Unstructured, children []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	ws, err := workspace.Decode(obj)
	if err != nil {
		return nil, err
	}
	return volumesToRetain(ws.Spec.Storage.ReclaimPolicy, children), nil
}

// Adopt lets a workspace take over a volume retained from an earlier workspace of its name
// only when both belong to the same user: one user never mounts another's home. The refusal
// does not say whose the volume is.
func (WorkspaceLifecycle) Adopt(obj *unstructured.Unstructured, retained metav1.Object) error {
	owner, _, _ := unstructured.NestedString(obj.Object, "spec", "owner")
	if owner == "" || retained.GetLabels()[workspace.OwnerLabel] != owner {
		return &engine.Refusal{Reason: infrav1alpha1.ReasonVolumeOwnedByAnotherUser,
			Message: "the volume belongs to another user; choose another name"}
	}
	return nil
}
