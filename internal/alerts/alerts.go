// Package alerts keeps the operator's alerting rules installed where Prometheus Operator runs:
// the PrometheusRule of config/prometheus, in the operator's namespace, owned by the operator's
// Deployment so that uninstalling the operator removes it.
//
// The bundle cannot carry it: OLM fails a whole InstallPlan whose bundle holds an object of a
// kind the cluster does not serve, so a PrometheusRule in the bundle would break every install
// on a cluster without Prometheus Operator. The operator makes it instead, on the leader, once
// monitoring.coreos.com/v1 is served, and looks again every interval (Prometheus Operator
// installed later is found then, and an edit of the rules is undone). A PrometheusRule of that
// name that is not the operator's is a reported conflict (an event on the Deployment), never
// taken over.
package alerts

import (
	"context"
	"fmt"
	"maps"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// GVK is Prometheus Operator's PrometheusRule.
var GVK = schema.GroupVersionKind{Group: "monitoring.coreos.com", Version: "v1", Kind: "PrometheusRule"}

// Reasons of the events on the operator's Deployment.
const (
	// EventRulesCreated: the PrometheusRule was made.
	EventRulesCreated = "AlertRulesCreated"
	// EventRulesUpdated: the PrometheusRule differed from the operator's rules (an edit, an
	// upgrade, other labels asked) and was set back to them.
	EventRulesUpdated = "AlertRulesUpdated"
	// EventRulesConflict: a PrometheusRule of that name exists that the operator did not make;
	// it is left as it is, and the operator's rules are not installed.
	EventRulesConflict = "AlertRulesConflict"
	// EventRulesFailed: making or updating the PrometheusRule failed; the message says why.
	EventRulesFailed = "AlertRulesFailed"
)

// +kubebuilder:rbac:groups=monitoring.coreos.com,namespace=system,resources=prometheusrules,verbs=get;create;update
// +kubebuilder:rbac:groups="",namespace=system,resources=pods,verbs=get
// +kubebuilder:rbac:groups=apps,namespace=system,resources=replicasets;deployments,verbs=get

// Installer keeps the PrometheusRule installed (see the package's comment); it is a
// manager.Runnable that runs on the leader.
type Installer struct {
	reader    client.Reader // the API server: neither rules nor pods are cached
	writer    client.Writer
	discovery discovery.ServerResourcesInterface
	recorder  record.EventRecorder
	log       logr.Logger
	rule      *unstructured.Unstructured
	cfg       Config
	// namespace and pod are the operator's own (POD_NAMESPACE, POD_NAME).
	namespace, pod string
}

// NewInstaller parses rule, the PrometheusRule's YAML, for the operator running as pod in
// namespace.
func NewInstaller(reader client.Reader, writer client.Writer, disc discovery.ServerResourcesInterface, recorder record.EventRecorder,
	log logr.Logger, rule []byte, cfg Config, namespace, pod string) (*Installer, error) {
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(rule, &obj.Object); err != nil {
		return nil, fmt.Errorf("reading the PrometheusRule: %w", err)
	}
	if obj.GroupVersionKind() != GVK || obj.GetName() == "" {
		return nil, fmt.Errorf("the alerting rules are a %s named %q, want a named %s", obj.GroupVersionKind(), obj.GetName(), GVK)
	}
	if namespace == "" || pod == "" {
		return nil, fmt.Errorf("the operator's namespace %q and pod %q (POD_NAMESPACE, POD_NAME) are both needed", namespace, pod)
	}
	return &Installer{reader: reader, writer: writer, discovery: disc, recorder: recorder, log: log,
		rule: obj, cfg: cfg, namespace: namespace, pod: pod}, nil
}

// NeedLeaderElection: one replica writes the rules.
func (i *Installer) NeedLeaderElection() bool { return true }

// Start runs Ensure now and every interval until ctx ends.
func (i *Installer) Start(ctx context.Context) error {
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := i.Ensure(ctx); err != nil {
			i.log.Error(err, "installing the alerting rules")
		}
	}, i.cfg.interval())
	return nil
}

// Ensure makes the PrometheusRule, or sets it back to the operator's rules, when Prometheus
// Operator's API is served; a PrometheusRule of that name that is not the operator's is left
// alone, with an event.
func (i *Installer) Ensure(ctx context.Context) error {
	served, err := Served(i.discovery)
	if err != nil || !served {
		return err
	}
	owner, err := i.deployment(ctx)
	if err != nil {
		return fmt.Errorf("finding the operator's Deployment: %w", err)
	}
	want := Desired(i.rule, i.namespace, i.cfg.Labels, owner)
	have := &unstructured.Unstructured{}
	have.SetGroupVersionKind(GVK)
	err = i.reader.Get(ctx, client.ObjectKeyFromObject(want), have)
	switch {
	case apierrors.IsNotFound(err):
		return i.write(ctx, owner, want, EventRulesCreated)
	case err != nil:
		return fmt.Errorf("getting PrometheusRule %s: %w", client.ObjectKeyFromObject(want), err)
	case !metav1.IsControlledBy(have, owner):
		i.recorder.Eventf(owner, "Warning", EventRulesConflict,
			"PrometheusRule %s exists and is not this operator's: it is left as it is, and the operator's alerting rules are not installed (delete it, or rename it, to have them)", want.GetName())
		return nil
	}
	if updated, changed := Updated(have, want); changed {
		return i.write(ctx, owner, updated, EventRulesUpdated)
	}
	return nil
}

// write creates obj (reason EventRulesCreated) or updates it, and says so on the Deployment.
func (i *Installer) write(ctx context.Context, owner *appsv1.Deployment, obj *unstructured.Unstructured, reason string) error {
	var err error
	if reason == EventRulesCreated {
		err = i.writer.Create(ctx, obj)
	} else {
		err = i.writer.Update(ctx, obj)
	}
	if err != nil {
		i.recorder.Eventf(owner, "Warning", EventRulesFailed, "PrometheusRule %s: %v", obj.GetName(), err)
		return fmt.Errorf("writing PrometheusRule %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	i.recorder.Eventf(owner, "Normal", reason, "PrometheusRule %s holds the operator's alerting rules", obj.GetName())
	return nil
}

// deployment is the Deployment the operator's pod belongs to, through its ReplicaSet.
func (i *Installer) deployment(ctx context.Context) (*appsv1.Deployment, error) {
	var pod metav1.PartialObjectMetadata
	pod.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "Pod"})
	if err := i.reader.Get(ctx, client.ObjectKey{Namespace: i.namespace, Name: i.pod}, &pod); err != nil {
		return nil, fmt.Errorf("getting pod %s: %w", i.pod, err)
	}
	rsRef := metav1.GetControllerOf(&pod)
	if rsRef == nil || rsRef.Kind != "ReplicaSet" {
		return nil, fmt.Errorf("pod %s is not a ReplicaSet's", i.pod)
	}
	var rs appsv1.ReplicaSet
	if err := i.reader.Get(ctx, client.ObjectKey{Namespace: i.namespace, Name: rsRef.Name}, &rs); err != nil {
		return nil, fmt.Errorf("getting ReplicaSet %s: %w", rsRef.Name, err)
	}
	depRef := metav1.GetControllerOf(&rs)
	if depRef == nil || depRef.Kind != "Deployment" || rs.UID != rsRef.UID {
		return nil, fmt.Errorf("ReplicaSet %s is not a Deployment's", rs.Name)
	}
	var dep appsv1.Deployment
	if err := i.reader.Get(ctx, client.ObjectKey{Namespace: i.namespace, Name: depRef.Name}, &dep); err != nil {
		return nil, fmt.Errorf("getting Deployment %s: %w", depRef.Name, err)
	}
	if dep.UID != depRef.UID {
		return nil, fmt.Errorf("Deployment %s is not the one ReplicaSet %s belongs to", dep.Name, rs.Name)
	}
	return &dep, nil
}

// Served reports whether the API server serves PrometheusRules.
func Served(d discovery.ServerResourcesInterface) (bool, error) {
	list, err := d.ServerResourcesForGroupVersion(GVK.GroupVersion().String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("discovering %s: %w", GVK.GroupVersion(), err)
	}
	for _, r := range list.APIResources {
		if r.Kind == GVK.Kind {
			return true, nil
		}
	}
	return false, nil
}

// Desired is the PrometheusRule the operator keeps: rule in namespace, with the labels asked
// besides its own, controlled by the operator's Deployment (without blocking its deletion,
// which would need the right to update the Deployment's finalizers).
func Desired(rule *unstructured.Unstructured, namespace string, labels map[string]string, owner *appsv1.Deployment) *unstructured.Unstructured {
	obj := rule.DeepCopy()
	obj.SetNamespace(namespace)
	l := obj.GetLabels()
	if l == nil {
		l = map[string]string{}
	}
	maps.Copy(l, labels)
	obj.SetLabels(l)
	obj.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: owner.Name, UID: owner.UID, Controller: ptr.To(true)}})
	return obj
}

// Updated is have, the operator's PrometheusRule, with want's spec and labels, and whether that
// changed anything. Labels others added are kept.
func Updated(have, want *unstructured.Unstructured) (*unstructured.Unstructured, bool) {
	out := have.DeepCopy()
	labels := out.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, want.GetLabels())
	out.SetLabels(labels)
	out.Object["spec"] = want.Object["spec"]
	return out, !equality.Semantic.DeepEqual(out.Object, have.Object)
}
