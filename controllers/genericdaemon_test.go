package controllers

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/cloudspace-dev/cloudspace-operator/internal/engine"
)

func TestGenericDaemonStatus(t *testing.T) {
	ds := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "DaemonSet",
		"status": map[string]any{"desiredNumberScheduled": int64(3), "numberReady": int64(2)}}}
	sa := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ServiceAccount"}}
	res, err := GenericDaemonLifecycle{}.Status(nil, engine.Observed{Children: []*unstructured.Unstructured{sa, ds}})
	got := res.Fields
	if err != nil || got["installed"] != int64(2) || got["desired"] != int64(3) {
		t.Errorf("status = %v, %v; want installed 2, desired 3", got, err)
	}
	res, _ = GenericDaemonLifecycle{}.Status(nil, engine.Observed{Children: []*unstructured.Unstructured{sa}})
	if got = res.Fields; got["installed"] != int64(0) {
		t.Errorf("without a DaemonSet: %v, want zero counts", got)
	}
}

// A DaemonSet whose pods cannot pull their image only ever says "not ready": the daemon's
// status must name the image and the reason.
func TestGenericDaemonStatusNamesAnUnpullableImage(t *testing.T) {
	pod := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "d-x7k2p"}, Status: corev1.PodStatus{Phase: corev1.PodPending,
		ContainerStatuses: []corev1.ContainerStatus{{Name: "daemon", Image: "reg/missing:1",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "not found"}}}}}}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&pod)
	if err != nil {
		t.Fatal(err)
	}
	res, err := GenericDaemonLifecycle{}.Status(nil, engine.Observed{Pods: []*unstructured.Unstructured{{Object: u}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"d-x7k2p", `"reg/missing:1"`, "ImagePullBackOff", "not found"} {
		if !strings.Contains(res.Failure, want) {
			t.Errorf("failure %q lacks %q", res.Failure, want)
		}
	}
}

func TestGenericDaemonValues(t *testing.T) {
	cr := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "infra.cloudspace.dev/v1alpha1", "kind": "GenericDaemon",
		"spec": map[string]any{"image": "x:1", "label": "logs=true", "resources": map[string]any{"limits": map[string]any{"cpu": "0.5"}}},
	}}
	v, err := GenericDaemonLifecycle{}.Values(cr)
	if err != nil {
		t.Fatal(err)
	}
	if v["image"] != "x:1" || v["label"] != "logs=true" {
		t.Errorf("values = %v", v)
	}
	// Quantities leave the typed spec in canonical form, as the API server stores them.
	cpu, _, _ := unstructured.NestedString(v, "resources", "limits", "cpu")
	if cpu != "500m" {
		t.Errorf("cpu = %q, want canonical 500m", cpu)
	}
	cr.Object["spec"] = "not an object"
	if _, err := (GenericDaemonLifecycle{}).Values(cr); err == nil {
		t.Error("an undecodable spec was accepted")
	}
}

// gdValues renders a GenericDaemon spec (YAML) with lc, as the engine does.
func gdValues(t *testing.T, lc GenericDaemonLifecycle, spec string) error {
	t.Helper()
	cr := &unstructured.Unstructured{}
	doc := "apiVersion: infra.cloudspace.dev/v1alpha1\nkind: GenericDaemon\nmetadata: {name: d, namespace: ns}\nspec: " + spec
	if err := yaml.Unmarshal([]byte(doc), &cr.Object); err != nil {
		t.Fatal(err)
	}
	_, err := lc.Values(cr)
	return err
}

// TestGenericDaemonRefusesWhatItsAuthorMayNotHave is the attacker's side: a user who may create
// GenericDaemons, but not read Secrets, asks for another user's workspace Secret, for every
// taint (the control plane's too) and for /dev/kvm. With the operator's defaults each is
// refused, naming the field; nothing renders.
func TestGenericDaemonRefusesWhatItsAuthorMayNotHave(t *testing.T) {
	cases := []struct{ name, spec, field string }{
		{name: "another user's workspace password",
			spec:  `{image: x, env: [{name: P, valueFrom: {secretKeyRef: {name: alice-ws-access, key: password}}}]}`,
			field: "spec.env[0].valueFrom.secretKeyRef"},
		{name: "every taint", spec: `{image: x, tolerations: [{operator: Exists}]}`, field: "spec.tolerations[0]"},
		{name: "every NoSchedule taint", spec: `{image: x, tolerations: [{operator: Exists, effect: NoSchedule}]}`,
			field: "spec.tolerations[0]"},
		{name: "the control plane",
			spec:  `{image: x, tolerations: [{key: node-role.kubernetes.io/control-plane, operator: Exists, effect: NoSchedule}]}`,
			field: "spec.tolerations[0]"},
		{name: "/dev/kvm as a limit", spec: `{image: x, resources: {limits: {devices.kubevirt.io/kvm: "1"}}}`,
			field: "spec.resources.limits[devices.kubevirt.io/kvm]"},
		{name: "a GPU as a request", spec: `{image: x, resources: {requests: {cpu: 1m, nvidia.com/gpu: "1"}}}`,
			field: "spec.resources.requests[nvidia.com/gpu]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := gdValues(t, GenericDaemonLifecycle{}, tc.spec)
			if err == nil || !strings.HasPrefix(err.Error(), tc.field+":") {
				t.Errorf("%v, want a refusal naming %s", err, tc.field)
			}
		})
	}
	// What every daemon may have still renders.
	if err := gdValues(t, GenericDaemonLifecycle{}, `{image: x, env: [{name: A, value: b}, {name: NODE, valueFrom: {fieldRef: {fieldPath: spec.nodeName}}}], resources: {limits: {cpu: 1, memory: 1Gi, ephemeral-storage: 1Gi}}}`); err != nil {
		t.Errorf("a plain daemon was refused: %v", err)
	}
}

// TestGenericDaemonAllowsWhatTheAdminAllows: the admin's allow-list lets exactly what it names
// through, and nothing wider.
func TestGenericDaemonAllowsWhatTheAdminAllows(t *testing.T) {
	var cfg GenericDaemonConfig
	for _, f := range []string{"node-role.kubernetes.io/control-plane:NoSchedule", "dedicated=logging", "*:PreferNoSchedule"} {
		if err := TolerationFlag(&cfg.AllowedTolerations)(f); err != nil {
			t.Fatal(err)
		}
	}
	if err := ResourceNameFlag(&cfg.AllowedExtendedResources)("nvidia.com/gpu"); err != nil {
		t.Fatal(err)
	}
	lc := GenericDaemonLifecycle{GenericDaemonConfig: cfg}
	cases := []struct {
		name, spec string
		allowed    bool
	}{
		{name: "the control plane's NoSchedule taint, as allowed",
			spec:    `{image: x, tolerations: [{key: node-role.kubernetes.io/control-plane, operator: Exists, effect: NoSchedule}]}`,
			allowed: true},
		{name: "the control plane's every effect, NoExecute too",
			spec:    `{image: x, tolerations: [{key: node-role.kubernetes.io/control-plane, operator: Exists}]}`,
			allowed: false},
		{name: "dedicated=logging, any effect",
			spec:    `{image: x, tolerations: [{key: dedicated, operator: Equal, value: logging, effect: NoExecute}]}`,
			allowed: true},
		{name: "dedicated=gpu", spec: `{image: x, tolerations: [{key: dedicated, operator: Equal, value: gpu}]}`, allowed: false},
		{name: "dedicated with every value", spec: `{image: x, tolerations: [{key: dedicated, operator: Exists}]}`, allowed: false},
		{name: "any key with PreferNoSchedule",
			spec:    `{image: x, tolerations: [{key: anything, operator: Exists, effect: PreferNoSchedule}]}`,
			allowed: true},
		{name: "every taint", spec: `{image: x, tolerations: [{operator: Exists}]}`, allowed: false},
		{name: "the allowed GPU", spec: `{image: x, resources: {limits: {nvidia.com/gpu: "1"}}}`, allowed: true},
		{name: "/dev/kvm, not allowed", spec: `{image: x, resources: {limits: {devices.kubevirt.io/kvm: "1"}}}`, allowed: false},
		{name: "a Secret", spec: `{image: x, env: [{name: P, valueFrom: {secretKeyRef: {name: s, key: k}}}]}`, allowed: false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := gdValues(t, lc, tc.spec); (err == nil) != tc.allowed {
				t.Errorf("%s: %v, want allowed %v", tc.spec, err, tc.allowed)
			}
		})
	}
}

func TestParseToleration(t *testing.T) {
	for in, want := range map[string]string{"*": "*", "*:NoSchedule": "*:NoSchedule", "a.io/b": "a.io/b", "k=v:NoExecute": "k=v:NoExecute", "k=": "k="} {
		tol, err := ParseToleration(in)
		if err != nil || FormatToleration(tol) != want {
			t.Errorf("ParseToleration(%q) = %s, %v; want %s", in, FormatToleration(tol), err, want)
		}
	}
	for _, bad := range []string{"", "k:Never", "*=v", "bad key"} {
		if _, err := ParseToleration(bad); err == nil {
			t.Errorf("ParseToleration(%q) accepted", bad)
		}
	}
}
