package main

import (
	"encoding/json"
	"flag"
	"maps"
	"os"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/cloudspace-dev/cloudspace-operator/controllers"
)

func TestParseFlags(t *testing.T) {
	t.Setenv("WATCH_NAMESPACE", "dev,staging")
	t.Setenv("WATCHES_FILE", "/opt/cloudspace/watches.yaml")
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("POD_NAMESPACE", "operators")
	o, err := parseFlags([]string{"--metrics-bind-address=:8443"})
	if err != nil {
		t.Fatal(err)
	}
	if o.app.LeaderElect {
		t.Error("leader election is on outside a cluster; want off by default")
	}
	if !slices.Equal(o.app.WatchNamespaces, []string{"dev", "staging"}) {
		t.Errorf("namespaces = %q", o.app.WatchNamespaces)
	}
	// OLM's Deployment sets POD_NAMESPACE: the Lease lives there, also for the CSV's command
	// line run outside the cluster.
	if o.app.WatchesFile != "/opt/cloudspace/watches.yaml" || o.app.MetricsAddr != ":8443" || !o.app.MetricsSecure ||
		o.app.LeaderElectionNamespace != "operators" {
		t.Errorf("options = %+v", o.app)
	}
	if _, err := parseFlags([]string{"--no-such-flag"}); err == nil {
		t.Error("an unknown flag was accepted")
	}
}

// TestFlagsFromTheEnvironment: CLOUDSPACE_<FLAG> sets a flag and wins over the command line (an
// OLM Subscription's config.env over the CSV's arguments); a repeatable flag gets both; a bad
// value is refused naming the variable and the flag.
func TestFlagsFromTheEnvironment(t *testing.T) {
	t.Setenv("CLOUDSPACE_WORKSPACE_IDE_AUTH", "gateway")
	t.Setenv("CLOUDSPACE_WORKSPACE_INGRESS_ANNOTATION", "example.com/from=env")
	o, err := parseFlags([]string{"--workspace-ide-auth=password", "--workspace-ingress-annotation=example.com/from=args"})
	if err != nil {
		t.Fatal(err)
	}
	if o.kinds.Workspace.IDEAuth != controllers.IDEAuthGateway {
		t.Errorf("IDE auth %q, want the environment's gateway", o.kinds.Workspace.IDEAuth)
	}
	if got := o.kinds.Workspace.IngressAnnotations["example.com/from"]; got != "env" {
		t.Errorf("the repeatable annotation's value is %q, want the environment's after the command line's", got)
	}
	t.Setenv("CLOUDSPACE_WORKSPACE_IDE_AUTH", "nobody")
	_, err = parseFlags(nil)
	if err == nil || !strings.Contains(err.Error(), "CLOUDSPACE_WORKSPACE_IDE_AUTH") || !strings.Contains(err.Error(), "--workspace-ide-auth") {
		t.Errorf("a bad value from the environment: %v, want an error naming the variable and the flag", err)
	}
}

func TestIngressAnnotationFlag(t *testing.T) {
	o, err := parseFlags([]string{"--workspace-ingress-annotation=cert-manager.io/cluster-issuer=letsencrypt",
		"--workspace-ingress-annotation=example.com/note=a=b"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"cert-manager.io/cluster-issuer": "letsencrypt", "example.com/note": "a=b"}
	if !maps.Equal(o.kinds.Workspace.IngressAnnotations, want) {
		t.Errorf("annotations = %v, want %v", o.kinds.Workspace.IngressAnnotations, want)
	}
	for _, bad := range []string{"no-equals-sign", "bad key=v", "=v"} {
		if _, err := parseFlags([]string{"--workspace-ingress-annotation=" + bad}); err == nil {
			t.Errorf("--workspace-ingress-annotation=%s accepted", bad)
		}
	}
}

func TestSoftMemoryLimit(t *testing.T) {
	cases := []struct {
		name           string
		containerLimit string
		gomemlimitSet  bool
		want           int64
		wantErr        bool
	}{
		{"no container limit", "", false, 0, false},
		{"downward API bytes", "268435456", false, 241591910, false},
		{"quantity", "1Gi", false, 966367641, false},
		{"GOMEMLIMIT wins", "268435456", true, 0, false},
		{"not a quantity", "lots", false, 0, true},
		{"zero", "0", false, 0, true},
	}
	for _, tc := range cases {
		got, err := softMemoryLimit(tc.containerLimit, tc.gomemlimitSet)
		if got != tc.want || (err != nil) != tc.wantErr {
			t.Errorf("%s: softMemoryLimit(%q, %v) = %d, %v; want %d, error %v", tc.name, tc.containerLimit, tc.gomemlimitSet, got, err, tc.want, tc.wantErr)
		}
	}
}

// TestEveryFlagIsDocumented: the flag table in docs/operations.md ("Operator flags") names every
// flag the operator takes (the zap logging flags as --zap-*).
func TestEveryFlagIsDocumented(t *testing.T) {
	doc, err := os.ReadFile("docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	bindFlags(newOptions()).VisitAll(func(f *flag.Flag) {
		if strings.HasPrefix(f.Name, "zap-") {
			return
		}
		if !strings.Contains(string(doc), "`--"+f.Name+"`") {
			t.Errorf("--%s is not in the flag table of docs/operations.md", f.Name)
		}
	})
}

// TestDocumentedDefaultsAreTheFlags: where the flag table of docs/operations.md states a
// default, it is the flag's, so that the table is checked rather than a third copy of them.
func TestDocumentedDefaultsAreTheFlags(t *testing.T) {
	// The defaults the table states are those outside a cluster with none of these set.
	for _, env := range []string{"WATCHES_FILE", "POD_NAMESPACE", "KUBERNETES_SERVICE_HOST",
		"RELATED_IMAGE_WORKSPACE_IDE", "RELATED_IMAGE_VM_CONTAINERDISK", "RELATED_IMAGE_VM_LAUNCHER"} {
		t.Setenv(env, "")
	}
	doc, err := os.ReadFile("docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	fs := bindFlags(newOptions())
	for name, stated := range documentedDefaults(t, string(doc)) {
		f := fs.Lookup(name)
		if f == nil {
			t.Errorf("the flag table documents --%s, which the operator does not take", name)
			continue
		}
		if !sameDefault(f, stated) {
			t.Errorf("the flag table says --%s defaults to %q; the flag: %q (%s)", name, stated, f.DefValue, f.Usage)
		}
	}
}

var (
	docFlag       = regexp.MustCompile("`--([a-z0-9-]+)`")
	docValue      = regexp.MustCompile("(env )?`([^`]*)`")
	docAside      = regexp.MustCompile(`\([^)]*\)`)
	usageDefault  = regexp.MustCompile(`\(default ([^)]*)\)$`)
	docFlagsTable = regexp.MustCompile("(?s)## Operator flags\n(.*?)\n## ")
)

// documentedDefaults are the defaults the flag table states, by flag: the values in backquotes
// of a row's default column, but for asides in parentheses and environment variables. A row of
// several flags states one value for each, in order; a row of one flag may state a list.
func documentedDefaults(t *testing.T, doc string) map[string]string {
	t.Helper()
	table := docFlagsTable.FindStringSubmatch(doc)
	if table == nil {
		t.Fatal("docs/operations.md has no Operator flags section")
	}
	out := map[string]string{}
	for _, line := range strings.Split(table[1], "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`--") {
			continue
		}
		var names, values []string
		for _, m := range docFlag.FindAllStringSubmatch(cells[1], -1) {
			names = append(names, m[1])
		}
		for _, m := range docValue.FindAllStringSubmatch(docAside.ReplaceAllString(cells[2], ""), -1) {
			if m[1] == "" {
				values = append(values, m[2])
			}
		}
		switch {
		case len(values) == 0:
		case len(names) == 1:
			out[names[0]] = strings.Join(values, ", ")
		case len(names) == len(values):
			for i, name := range names {
				out[name] = values[i]
			}
		default:
			t.Errorf("the flag table's row of %v states %d defaults, not one for each flag", names, len(values))
		}
	}
	return out
}

// sameDefault reports whether stated is f's default: its DefValue, the "(default ...)" its
// help ends with (quantity flags), or, for a repeatable flag, which has no value of its own
// (flag.Func), what its help says is used when it is not given.
func sameDefault(f *flag.Flag, stated string) bool {
	if m := usageDefault.FindStringSubmatch(f.Usage); m != nil {
		return m[1] == stated
	}
	if f.DefValue == "" {
		return strings.Contains(f.Usage, stated)
	}
	if stated == f.DefValue {
		return true
	}
	a, errA := time.ParseDuration(stated)
	b, errB := time.ParseDuration(f.DefValue)
	return errA == nil && errB == nil && a == b
}

// TestGCPercent: the operator collects garbage at gcPercent, unless GOGC says otherwise.
func TestGCPercent(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	for _, tc := range []struct {
		gogc string // "": unset
		want int
	}{{"", gcPercent}, {"80", 77}} {
		if tc.gogc != "" {
			t.Setenv("GOGC", tc.gogc)
		} else if v, set := os.LookupEnv("GOGC"); set {
			t.Setenv("GOGC", v) // restored after the test
			os.Unsetenv("GOGC")
		}
		debug.SetGCPercent(77) // what the runtime took from GOGC, as far as the operator knows
		setGCPercent(logr.Discard())
		if got := debug.SetGCPercent(100); got != tc.want {
			t.Errorf("GOGC %q: the collector's target is %d%%, want %d%%", tc.gogc, got, tc.want)
		}
	}
}

// dashboardMetric is a metric name in a PromQL expression: the operator's, controller-runtime's
// and the Go process's.
var dashboardMetric = regexp.MustCompile(`\b(?:cloudspace|controller_runtime|workqueue|process|go)_[a-z_]+\b`)

// TestDashboardQueriesServedMetrics: every metric the Grafana dashboard in config/grafana
// queries is one the operator serves (its registration in the binary's registry is found), and
// every one of the operator's own is documented in docs/engine.md.
func TestDashboardQueriesServedMetrics(t *testing.T) {
	data, err := os.ReadFile("config/grafana/cloudspace-operator-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dashboard struct {
		UID    string `json:"uid"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &dashboard); err != nil || dashboard.UID == "" {
		t.Fatalf("the dashboard does not decode, or has no uid: %v", err)
	}
	doc, err := os.ReadFile("docs/engine.md")
	if err != nil {
		t.Fatal(err)
	}
	queried := 0
	for _, p := range dashboard.Panels {
		for _, target := range p.Targets {
			for _, name := range dashboardMetric.FindAllString(target.Expr, -1) {
				queried++
				if !served(name) {
					t.Errorf("panel %q queries %s, which the operator does not serve", p.Title, name)
				}
				if base := metricFamily(name); strings.HasPrefix(base, "cloudspace_") && !strings.Contains(string(doc), "`"+base) {
					t.Errorf("panel %q queries %s, which docs/engine.md does not document", p.Title, base)
				}
			}
		}
	}
	if queried < 10 {
		t.Errorf("the dashboard queries %d metrics; its panels are missing", queried)
	}
}

// metricFamily is the family a series name belongs to: a histogram's without _bucket, _sum or _count.
func metricFamily(name string) string {
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && served(base) {
			return base
		}
	}
	return name
}

// served reports whether a metric family or series of that name is registered with
// controller-runtime's registry, which the operator serves: a collector of the same name with
// another help string is refused then.
func served(name string) bool {
	if base := metricFamily(name); base != name {
		return true
	}
	probe := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: "a probe of the name"})
	if err := metrics.Registry.Register(probe); err != nil {
		return true
	}
	metrics.Registry.Unregister(probe)
	return false
}
