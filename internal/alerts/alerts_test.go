package alerts

import (
	"flag"
	"maps"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"
)

const ruleYAML = `apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: cloudspace-operator-alerts
  labels: {app.kubernetes.io/name: cloudspace-operator}
spec:
  groups:
  - name: g
    rules:
    - {alert: A, expr: up == 0}
`

func TestNewInstallerRefusesWhatItCannotInstall(t *testing.T) {
	for _, tc := range []struct {
		name, rule, namespace, pod, want string
	}{
		{name: "not YAML", rule: "{", namespace: "ns", pod: "p", want: "reading the PrometheusRule"},
		{name: "another kind", rule: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n", namespace: "ns", pod: "p", want: "/v1, Kind=ConfigMap"},
		{name: "no namespace", rule: ruleYAML, pod: "p", want: "POD_NAMESPACE"},
		{name: "no pod", rule: ruleYAML, namespace: "ns", want: "POD_NAME"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewInstaller(nil, nil, nil, nil, logr.Discard(), []byte(tc.rule), DefaultConfig(), tc.namespace, tc.pod)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}

// TestServed: only a server listing PrometheusRule under monitoring.coreos.com/v1 serves it.
func TestServed(t *testing.T) {
	for _, tc := range []struct {
		name      string
		resources []*metav1.APIResourceList
		want      bool
	}{
		{name: "no such group", want: false},
		{name: "the group without the kind", want: false, resources: []*metav1.APIResourceList{{GroupVersion: "monitoring.coreos.com/v1",
			APIResources: []metav1.APIResource{{Name: "servicemonitors", Kind: "ServiceMonitor"}}}}},
		{name: "served", want: true, resources: []*metav1.APIResourceList{{GroupVersion: "monitoring.coreos.com/v1",
			APIResources: []metav1.APIResource{{Name: "prometheusrules", Kind: "PrometheusRule"}}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{Resources: tc.resources}}
			got, err := Served(d)
			if err != nil || got != tc.want {
				t.Errorf("Served: %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

// TestDesiredAndUpdated: the operator's PrometheusRule is the rule in its namespace with the
// labels asked, controlled by its Deployment; updating one sets the spec and the operator's
// labels back and keeps others', and changes nothing when nothing differs.
func TestDesiredAndUpdated(t *testing.T) {
	inst, err := NewInstaller(nil, nil, nil, nil, logr.Discard(), []byte(ruleYAML), DefaultConfig(), "ns", "p")
	if err != nil {
		t.Fatal(err)
	}
	rule := inst.rule
	owner := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "op", UID: "u1"}}
	want := Desired(rule, "ops", map[string]string{"release": "kps"}, owner)
	if want.GetNamespace() != "ops" || !maps.Equal(want.GetLabels(), map[string]string{"app.kubernetes.io/name": "cloudspace-operator", "release": "kps"}) ||
		!metav1.IsControlledBy(want, owner) || want.GetOwnerReferences()[0].BlockOwnerDeletion != nil || rule.GetNamespace() != "" {
		t.Errorf("desired: %v; the rule after: %v", want.Object, rule.Object)
	}
	if _, changed := Updated(want, want); changed {
		t.Error("an up-to-date PrometheusRule would be updated")
	}
	edited := want.DeepCopy()
	edited.Object["spec"] = map[string]any{}
	edited.SetLabels(map[string]string{"team": "x", "release": "old"})
	got, changed := Updated(edited, want)
	if !changed || !maps.Equal(got.GetLabels(), map[string]string{"app.kubernetes.io/name": "cloudspace-operator", "release": "kps", "team": "x"}) {
		t.Errorf("updated %v (changed %v)", got.Object, changed)
	}
	if _, again := Updated(got, want); again {
		t.Error("the update is not up to date")
	}
}

func TestLabelsFlag(t *testing.T) {
	for _, tc := range []struct {
		value, want, err string
	}{
		{value: "release=kps", want: "release=kps"},
		{value: " b=2, a=1,", want: "a=1,b=2"},
		{value: "", want: ""},
		{value: "release", err: `"release" is not key=value`},
		{value: "bad key=1", err: "bad key=1"},
		{value: "k=bad value", err: "k=bad value"},
	} {
		t.Run(tc.value, func(t *testing.T) {
			var c Config
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			c.BindFlags(fs)
			err := fs.Set("prometheus-rule-labels", tc.value)
			switch {
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("error %v, want one saying %q", err, tc.err)
			case tc.err == "" && (err != nil || fs.Lookup("prometheus-rule-labels").Value.String() != tc.want):
				t.Errorf("%q (%v), want %q", fs.Lookup("prometheus-rule-labels").Value.String(), err, tc.want)
			}
		})
	}
}
