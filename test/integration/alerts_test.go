package integration

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/cloudspace-dev/cloudspace-operator/internal/alerts"
	"github.com/cloudspace-dev/cloudspace-operator/test/framework"
)

// TestAlertRulesAreInstalledAndKept: without Prometheus Operator the installer does nothing,
// and fails nothing. Once its API is served (its CRD, generated from its Go types), the
// operator makes its PrometheusRule in its namespace: the rules of config/prometheus, the labels
// the admin asked for, controlled by the Deployment its pod belongs to. An edit of the rules is
// undone, a label someone else added is kept, and a look that finds nothing to change writes
// nothing. Each write is an event on the Deployment.
func TestAlertRulesAreInstalledAndKept(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	dep, pod := operatorPod(t, ns)
	inst := newInstaller(t, ns, pod)
	if err := inst.Ensure(ctx); err != nil {
		t.Fatalf("without Prometheus Operator: %v", err)
	}
	servePrometheusRules(t)
	if err := inst.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	want := ruleFile(t)
	got := prometheusRule(ns, want.GetName())
	if err := get(got); err != nil {
		t.Fatalf("no PrometheusRule after the first look: %v", err)
	}
	if !equality.Semantic.DeepEqual(got.Object["spec"], want.Object["spec"]) {
		t.Errorf("the PrometheusRule's spec is not config/prometheus's:\n%v", got.Object["spec"])
	}
	if l := got.GetLabels(); l["release"] != "kps" || l["app.kubernetes.io/name"] != "cloudspace-operator" {
		t.Errorf("labels %v, want the rule file's and release=kps", l)
	}
	if !metav1.IsControlledBy(got, dep) || got.GetOwnerReferences()[0].BlockOwnerDeletion != nil {
		t.Errorf("owners %+v, want the Deployment %s (%s) as controller, not blocking its deletion", got.GetOwnerReferences(), dep.Name, dep.UID)
	}
	eventually(t, timeout, func() error { return eventOn(dep, corev1.EventTypeNormal, alerts.EventRulesCreated, want.GetName()) })

	edited := got.DeepCopy()
	edited.Object["spec"] = map[string]any{"groups": []any{}}
	edited.SetLabels(map[string]string{"team": "platform"})
	if err := k8sClient.Update(ctx, edited); err != nil {
		t.Fatal(err)
	}
	if err := inst.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	if err := get(got); err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(got.Object["spec"], want.Object["spec"]) || got.GetLabels()["team"] != "platform" || got.GetLabels()["release"] != "kps" {
		t.Errorf("after an edit: labels %v, spec %v; want the rules back, team=platform kept, release=kps", got.GetLabels(), got.Object["spec"])
	}
	eventually(t, timeout, func() error { return eventOn(dep, corev1.EventTypeNormal, alerts.EventRulesUpdated, want.GetName()) })

	version := got.GetResourceVersion()
	if err := inst.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	if err := get(got); err != nil || got.GetResourceVersion() != version {
		t.Errorf("a look with nothing to change wrote: version %s, was %s (%v)", got.GetResourceVersion(), version, err)
	}
}

// TestAlertRulesNeverTakeAnotherPrometheusRule: a PrometheusRule of the same name that another
// team made, or that another Deployment controls, is left exactly as it is, and the conflict is
// a warning event on the operator's Deployment.
func TestAlertRulesNeverTakeAnotherPrometheusRule(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		owners func(t *testing.T, ns string) []metav1.OwnerReference
	}{
		{name: "nobody's", owners: func(*testing.T, string) []metav1.OwnerReference { return nil }},
		{name: "another Deployment's", owners: func(t *testing.T, ns string) []metav1.OwnerReference {
			other, _ := operatorPod(t, ns)
			return []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: other.Name, UID: other.UID, Controller: ptr.To(true)}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			servePrometheusRules(t)
			ns := newNamespace(t)
			dep, pod := operatorPod(t, ns)
			theirs := prometheusRule(ns, ruleFile(t).GetName())
			theirs.Object["spec"] = map[string]any{"groups": []any{map[string]any{"name": "theirs", "rules": []any{map[string]any{"record": "x", "expr": "1"}}}}}
			theirs.SetOwnerReferences(tc.owners(t, ns))
			if err := k8sClient.Create(ctx, theirs); err != nil {
				t.Fatal(err)
			}
			before := theirs.DeepCopy()
			if err := newInstaller(t, ns, pod).Ensure(ctx); err != nil {
				t.Fatal(err)
			}
			if err := get(theirs); err != nil {
				t.Fatal(err)
			}
			if theirs.GetResourceVersion() != before.GetResourceVersion() || !equality.Semantic.DeepEqual(theirs.Object["spec"], before.Object["spec"]) {
				t.Errorf("their PrometheusRule was written: version %s, was %s; spec %v", theirs.GetResourceVersion(), before.GetResourceVersion(), theirs.Object["spec"])
			}
			eventually(t, timeout, func() error { return warningEvent(dep, alerts.EventRulesConflict, "not this operator's") })
		})
	}
}

// servePrometheusRules installs Prometheus Operator's PrometheusRule CRD for the test.
func servePrometheusRules(t *testing.T) {
	t.Helper()
	crds, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{ErrorIfPathMissing: true,
		Paths: []string{filepath.Join(framework.RepoRoot(), "test", "testdata", "crds", "prometheus-operator")}})
	if err != nil {
		t.Fatal(err)
	}
	// Gone before the next test installs it again: a CRD being deleted is not installed anew.
	t.Cleanup(func() {
		if err := envtest.UninstallCRDs(cfg, envtest.CRDInstallOptions{CRDs: crds}); err != nil {
			t.Error(err)
		}
		for _, crd := range crds {
			m := &metav1.PartialObjectMetadata{}
			m.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
			m.SetName(crd.Name)
			eventually(t, timeout, func() error { return gone(m) })
		}
	})
}

// newInstaller is the operator's installer as app.SetupAlerts makes it, running as pod in ns,
// with events recorded to the API server.
func newInstaller(t *testing.T, ns, pod string) *alerts.Installer {
	t.Helper()
	broadcaster := record.NewBroadcaster()
	t.Cleanup(broadcaster.Shutdown)
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: clientset.CoreV1().Events("")})
	recorder := broadcaster.NewRecorder(framework.Scheme(), corev1.EventSource{Component: "cloudspace-operator"})
	inst, err := alerts.NewInstaller(k8sClient, k8sClient, discovery.NewDiscoveryClientForConfigOrDie(cfg), recorder, logr.Discard(),
		ruleBytes(t), alerts.Config{Enabled: true, Labels: map[string]string{"release": "kps"}}, ns, pod)
	if err != nil {
		t.Fatal(err)
	}
	return inst
}

// operatorPod makes, in ns, what a Deployment of the operator leaves (no controller runs here to
// make them): the Deployment, its ReplicaSet and a pod of that, each controlled by the one
// before.
func operatorPod(t *testing.T, ns string) (*appsv1.Deployment, string) {
	t.Helper()
	ctx := context.Background()
	labels := map[string]string{"app": "operator"}
	template := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "manager", Image: "cloudspace-operator:v0.1.0"}}}}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "operator-"},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: template}}
	if err := k8sClient.Create(ctx, dep); err != nil {
		t.Fatal(err)
	}
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: dep.Name + "-", OwnerReferences: []metav1.OwnerReference{controllerRef(dep, "Deployment")}},
		Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: template}}
	if err := k8sClient.Create(ctx, rs); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: rs.Name + "-", Labels: labels, OwnerReferences: []metav1.OwnerReference{controllerRef(rs, "ReplicaSet")}},
		Spec: template.Spec}
	if err := k8sClient.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	return dep, pod.Name
}

func controllerRef(owner client.Object, kind string) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "apps/v1", Kind: kind, Name: owner.GetName(), UID: owner.GetUID(), Controller: ptr.To(true)}
}

// ruleBytes is config/prometheus's PrometheusRule, as the operator embeds it.
func ruleBytes(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile(framework.AlertRulesPath())
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// ruleFile is config/prometheus's PrometheusRule.
func ruleFile(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	doc, err := framework.AlertRule()
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: doc}
}

// prometheusRule is an empty PrometheusRule named name in ns, to read or create.
func prometheusRule(ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(alerts.GVK)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}
