package realnode

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/cloudspace-dev/cloudspace-operator/internal/alerts"
	"github.com/cloudspace-dev/cloudspace-operator/test/framework"
	"github.com/cloudspace-dev/cloudspace-operator/test/infra/images"
)

// promNS is where the suite's Prometheus runs: a namespace of its own, as an admin's
// monitoring stack has, with no right in the operator's but to find its metrics endpoints.
const (
	promNS       = "real-prometheus"
	promJob      = "cloudspace-operator"
	metricsRole  = "cloudspace-operator-metrics-reader"
	promSA       = "prometheus"
	promInterval = "5s"
)

// promConfig scrapes the operator as prometheus-operator would for a ServiceMonitor on the
// metrics Service: its EndpointSlices found through the API, the port named https, the
// ServiceAccount's token as the bearer. The serving certificate is the operator's own
// self-signed one (docs/operations.md, "Metrics"), so its chain is not checked.
var promConfig = fmt.Sprintf(`global:
  scrape_interval: %[1]s
  evaluation_interval: %[1]s
rule_files: [/etc/prometheus/rules.yaml]
scrape_configs:
- job_name: %[2]s
  scheme: https
  authorization:
    credentials_file: /var/run/secrets/kubernetes.io/serviceaccount/token
  tls_config:
    insecure_skip_verify: true
  kubernetes_sd_configs:
  - role: endpointslice
    namespaces:
      names: [%[3]s]
  relabel_configs:
  - source_labels: [__meta_kubernetes_service_name, __meta_kubernetes_endpointslice_port_name]
    regex: cloudspace-operator-controller-manager-metrics-service;https
    action: keep
`, promInterval, promJob, operatorNS)

// prometheusServer is the suite's Prometheus, reached at addr from the node's network namespace.
type prometheusServer struct{ addr string }

// startPrometheus runs Prometheus (built from source, images.PrometheusRepo) in promNS with the
// alerting rules the operator installed (operatorRules), its ServiceAccount bound to the
// bundle's metrics-reader ClusterRole, on any node but avoid (which the suite drains and
// loses); everything goes when t ends.
func startPrometheus(t *testing.T, avoid string) *corev1.Pod {
	t.Helper()
	ensureNamespace(t, promNS)
	rules := operatorRules(t)
	pod := prometheusPod(t, avoid)
	objs := []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: promSA, Namespace: promNS}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: promNS + "-metrics-reader"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: metricsRole},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: promSA, Namespace: promNS}}},
		// Service discovery: the operator namespace's Services, EndpointSlices and pods.
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: promNS + "-discovery", Namespace: operatorNS},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"services", "pods"}, Verbs: []string{"get", "list", "watch"}},
				{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"get", "list", "watch"}}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: promNS + "-discovery", Namespace: operatorNS},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: promNS + "-discovery"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: promSA, Namespace: promNS}}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "prometheus", Namespace: promNS},
			Data: map[string]string{"prometheus.yaml": promConfig, "rules.yaml": string(rules)}},
		pod,
	}
	ctx := context.Background()
	for _, o := range objs {
		// What an interrupted run left goes first: the config and the pod are this run's.
		_ = k8sClient.Delete(ctx, o, client.GracePeriodSeconds(0))
		framework.WaitFor(t, time.Minute, "an earlier run's "+o.GetName()+" gone", func(ctx context.Context) error {
			if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(o), o.DeepCopyObject().(client.Object)); !apierrors.IsNotFound(err) {
				return fmt.Errorf("still there (%v)", err)
			}
			return nil
		})
		if err := k8sClient.Create(ctx, o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
		t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), o, client.GracePeriodSeconds(0)) })
	}
	return pod
}

// servePrometheusRules serves Prometheus Operator's PrometheusRule kind until t ends, as a
// cluster running Prometheus Operator does: its CRD, generated from its Go types
// (hack/thirdparty-crds.sh). The operator, installed after, finds it at its start.
func servePrometheusRules(t *testing.T) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(framework.RepoRoot(), "test", "testdata", "crds", "prometheus-operator", "monitoring.coreos.com_prometheusrules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	crd := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &crd.Object); err != nil {
		t.Fatal(err)
	}
	if err := k8sClient.Create(context.Background(), crd); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), crd) })
	waitFor(t, time.Minute, "PrometheusRules served", func(ctx context.Context) error {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(alerts.GVK.GroupVersion().WithKind("PrometheusRuleList"))
		return k8sClient.List(ctx, list)
	})
}

// operatorRules waits for the PrometheusRule the operator installs where Prometheus Operator
// runs (internal/alerts): config/prometheus's, in its namespace, controlled by its Deployment.
// Its spec is the rule file Prometheus Operator would give Prometheus.
func operatorRules(t *testing.T) []byte {
	t.Helper()
	want, err := framework.AlertRule()
	if err != nil {
		t.Fatal(err)
	}
	rule := operatorRule(t)
	var file []byte
	waitFor(t, time.Minute, "the operator's PrometheusRule", func(ctx context.Context) error {
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(rule), rule); err != nil {
			return err
		}
		var dep appsv1.Deployment
		ref := metav1.GetControllerOf(rule)
		if ref == nil || ref.Kind != "Deployment" || k8sClient.Get(ctx, client.ObjectKey{Namespace: operatorNS, Name: ref.Name}, &dep) != nil || dep.UID != ref.UID {
			return fmt.Errorf("controlled by %+v, not the operator's Deployment", ref)
		}
		if !equality.Semantic.DeepEqual(rule.Object["spec"], want["spec"]) {
			return fmt.Errorf("its spec is not config/prometheus's")
		}
		file, err = yaml.Marshal(rule.Object["spec"])
		return err
	})
	return file
}

// operatorRule is the PrometheusRule the operator installs, to read.
func operatorRule(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	want, err := framework.AlertRule()
	if err != nil {
		t.Fatal(err)
	}
	rule := &unstructured.Unstructured{Object: map[string]any{"metadata": want["metadata"]}}
	rule.SetGroupVersionKind(alerts.GVK)
	rule.SetNamespace(operatorNS)
	return rule
}

// prometheusPod runs Prometheus as the restricted Pod Security Standard asks, its data in an
// emptyDir, off the node avoid.
func prometheusPod(t *testing.T, avoid string) *corev1.Pod {
	mount := func(name, path string) corev1.VolumeMount { return corev1.VolumeMount{Name: name, MountPath: path} }
	notOn := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpNotIn, Values: []string{avoid}}}}}}}}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "prometheus", Namespace: promNS, Labels: map[string]string{"app": "prometheus"}},
		Spec: corev1.PodSpec{ServiceAccountName: promSA, TerminationGracePeriodSeconds: ptr.To[int64](0), Affinity: notOn,
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65534),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{Name: "prometheus", Image: ref(t, images.PrometheusRepo+":v0.316.0"),
				Args: []string{"--config.file=/etc/prometheus/prometheus.yaml", "--storage.tsdb.path=/prometheus",
					"--web.listen-address=:9090"},
				Ports:        []corev1.ContainerPort{{Name: "web", ContainerPort: 9090}},
				VolumeMounts: []corev1.VolumeMount{mount("config", "/etc/prometheus"), mount("data", "/prometheus")},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/-/ready", Port: intstr.FromString("web")}},
					PeriodSeconds: 1},
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}}},
			Volumes: []corev1.Volume{
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "prometheus"}}}},
				{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}}}
}

// checkPrometheusScrapes waits until the operator's one metrics endpoint is a healthy target
// whose samples carry the operator's own metrics, and the rules are loaded without error.
func checkPrometheusScrapes(t *testing.T, pod *corev1.Pod) prometheusServer {
	waitFor(t, 2*time.Minute, "Prometheus ready", func(ctx context.Context) error {
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return err
		}
		for _, c := range pod.Status.ContainerStatuses {
			if c.Ready {
				return nil
			}
		}
		return fmt.Errorf("not ready: %s", pod.Status.Phase)
	})
	prom := prometheusServer{addr: net.JoinHostPort(pod.Status.PodIP, "9090")}
	waitFor(t, time.Minute, "the operator a healthy target", func(ctx context.Context) error {
		var targets struct {
			ActiveTargets []struct {
				Labels    map[string]string `json:"labels"`
				Health    string            `json:"health"`
				LastError string            `json:"lastError"`
			} `json:"activeTargets"`
		}
		if err := prom.get(ctx, "/api/v1/targets?state=active", &targets); err != nil {
			return err
		}
		if len(targets.ActiveTargets) != 1 {
			return fmt.Errorf("%d active targets, want the operator's one: %+v", len(targets.ActiveTargets), targets.ActiveTargets)
		}
		if tg := targets.ActiveTargets[0]; tg.Health != "up" || tg.Labels["job"] != promJob {
			return fmt.Errorf("target %v: %s %s", tg.Labels, tg.Health, tg.LastError)
		}
		return nil
	})
	waitFor(t, time.Minute, "the operator's metrics in Prometheus", func(ctx context.Context) error {
		return prom.expectSeries(ctx, `controller_runtime_reconcile_total{job="`+promJob+`",controller="workspace.infra.cloudspace.dev"}`)
	})
	checkRulesLoaded(t, prom)
	// Its web UI, built from source with it (hack/prometheus-ui.sh), is served.
	if code, body, err := get("http://"+prom.addr+"/query", ""); err != nil || code != http.StatusOK || !strings.Contains(body, `<div id="root">`) {
		t.Errorf("Prometheus's UI: GET /query: %d %v %.300s", code, err, body)
	}
	return prom
}

// checkRulesLoaded: every alerting rule of the PrometheusRule is loaded and evaluates cleanly.
func checkRulesLoaded(t *testing.T, prom prometheusServer) {
	alerting, err := framework.AlertingRules()
	if err != nil {
		t.Fatal(err)
	}
	want := len(alerting)
	waitFor(t, time.Minute, "the alerting rules evaluated", func(ctx context.Context) error {
		var rules struct {
			Groups []struct {
				Rules []struct {
					Name, Health, LastError string
				} `json:"rules"`
			} `json:"groups"`
		}
		if err := prom.get(ctx, "/api/v1/rules?type=alert", &rules); err != nil {
			return err
		}
		n := 0
		for _, g := range rules.Groups {
			for _, r := range g.Rules {
				if r.Health != "ok" {
					return fmt.Errorf("rule %s: health %q %s", r.Name, r.Health, r.LastError)
				}
				n++
			}
		}
		if n != want || want == 0 {
			return fmt.Errorf("%d alerting rules loaded, want the PrometheusRule's %d", n, want)
		}
		return nil
	})
}

// checkCrashLoopAlert: after checkCrashingWorkspace's IDE crash-looped, CloudspaceCrashLooping
// fires for Workspaces in the suite's Prometheus, with its runbook; the starts before it are
// there too, and both are kept as screenshots.
func checkCrashLoopAlert(t *testing.T, prom prometheusServer) {
	if prom.addr == "" {
		t.Fatal("the suite's Prometheus did not start")
	}
	waitFor(t, 2*time.Minute, "CloudspaceCrashLooping firing", func(ctx context.Context) error {
		var alerts struct {
			Alerts []struct {
				Labels      map[string]string `json:"labels"`
				Annotations map[string]string `json:"annotations"`
				State       string            `json:"state"`
			} `json:"alerts"`
		}
		if err := prom.get(ctx, "/api/v1/alerts", &alerts); err != nil {
			return err
		}
		for _, a := range alerts.Alerts {
			if a.Labels["alertname"] == "CloudspaceCrashLooping" && a.Labels["kind"] == "Workspace" && a.State == "firing" {
				if !strings.Contains(a.Annotations["runbook_url"], "runbooks.md#cloudspacecrashlooping") {
					return fmt.Errorf("firing without its runbook: %v", a.Annotations)
				}
				return nil
			}
		}
		failures, err := prom.query(ctx, "cloudspace_failures_total")
		return fmt.Errorf("alerts %+v; cloudspace_failures_total %s %v", alerts.Alerts, failures, err)
	})
	checkStartsObserved(t, prom)
	screenshotPrometheus(t)
}

// checkStartsObserved: the workspaces started before (the browser check's, created and started
// again) are in Prometheus with every phase of their start: asked to ready (total), the
// operator's part, scheduling and the containers.
func checkStartsObserved(t *testing.T, prom prometheusServer) {
	waitFor(t, time.Minute, "every phase of the workspaces' starts in Prometheus", func(ctx context.Context) error {
		observed, err := prom.query(ctx, `cloudspace_start_seconds_count{kind="Workspace"} > 0`)
		if err != nil {
			return err
		}
		seen := map[string]bool{}
		for _, raw := range observed {
			var series struct {
				Metric map[string]string `json:"metric"`
			}
			if err := json.Unmarshal(raw, &series); err != nil {
				return err
			}
			seen[series.Metric["phase"]] = true
		}
		var missing []string
		for _, phase := range []string{"total", "operator", "scheduling", "containers"} {
			if !seen[phase] {
				missing = append(missing, phase)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("no start observed in phases %v: %s", missing, observed)
		}
		return nil
	})
}

// startTimeQuery is the graph of the README's screenshot: the workspaces' start times, 90th
// percentile, by phase.
const startTimeQuery = `histogram_quantile(0.9, sum by (phase, le) (rate(cloudspace_start_seconds_bucket{kind="Workspace"}[10m])))`

// screenshotPrometheus has headless Chromium open Prometheus's UI as an admin would (through
// kubectl port-forward), and keeps what it shows in bin/test-artifacts: the alerts page with
// CloudspaceCrashLooping firing, and the graph of the workspaces' start times (make
// screenshots copies both into docs/images for the README).
func screenshotPrometheus(t *testing.T) {
	ui := "http://127.0.0.1:" + portForward(t, promNS, "pod/prometheus", 9090)
	b := newBrowser(t)
	// Tall enough for the firing alert's labels under its rule, and the graph's legend.
	if err := b.call("Emulation.setDeviceMetricsOverride", map[string]any{"width": 1280, "height": 1000, "deviceScaleFactor": 1, "mobile": false}, nil); err != nil {
		t.Fatal(err)
	}
	// The alert's row opens (a click on it, once it is there and closed) to show its labels and
	// annotations.
	openAlert := `(() => {
		const row = [...document.querySelectorAll("button")].find(b => b.innerText.includes("CloudspaceCrashLooping"));
		if (row && row.getAttribute("aria-expanded") !== "true") row.click();
	})()`
	shots := []struct{ file, path, what, action, ready string }{
		{"prometheus-alert.png", "/alerts", "the alert firing", openAlert,
			// The rule's expression shows once its row is open; "Workspace" only in the firing
			// alert's labels (the rule's own text has templates).
			`document.body.innerText.includes("sum by (kind)") && document.body.innerText.includes("Workspace")`},
		{"prometheus-start-time.png", "/query?g0.tab=graph&g0.range_input=5m&g0.expr=" + url.QueryEscape(startTimeQuery),
			"the start-time graph", "", `document.querySelector(".uplot canvas") !== null && document.body.innerText.includes("total")`},
	}
	for _, s := range shots {
		if err := b.call("Page.navigate", map[string]any{"url": ui + s.path}, nil); err != nil {
			t.Fatal(err)
		}
		waitFor(t, time.Minute, "Prometheus's UI showing "+s.what, func(context.Context) error {
			if s.action != "" {
				_, _ = b.eval(s.action)
			}
			if ok, err := b.eval(s.ready); err != nil || ok != "true" {
				text, _ := b.eval("document.body.innerText")
				return fmt.Errorf("not yet (%v): the page shows %.300q", err, text)
			}
			return nil
		})
		keepScreenshot(t, b, s.file)
	}
}

// expectSeries fails unless query returns a series.
func (p prometheusServer) expectSeries(ctx context.Context, query string) error {
	result, err := p.query(ctx, query)
	if err == nil && len(result) == 0 {
		err = fmt.Errorf("%s: no series", query)
	}
	return err
}

// query is an instant query's result.
func (p prometheusServer) query(ctx context.Context, query string) ([]json.RawMessage, error) {
	var data struct {
		Result []json.RawMessage `json:"result"`
	}
	err := p.get(ctx, "/api/v1/query?query="+url.QueryEscape(query), &data)
	return data.Result, err
}

// get calls Prometheus's HTTP API and decodes its data into out.
func (p prometheusServer) get(ctx context.Context, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.addr+path, nil)
	if err != nil {
		return err
	}
	resp, err := nodeHTTP.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var body struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return fmt.Errorf("GET %s: %d: %w", path, resp.StatusCode, err)
	}
	if body.Status != "success" {
		return fmt.Errorf("GET %s: %d %s", path, resp.StatusCode, body.Error)
	}
	return json.Unmarshal(body.Data, out)
}
