package main

import (
	"flag"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
)

func TestSplitNamespaces(t *testing.T) {
	cases := map[string][]string{
		"":                 nil,
		"team-a":           {"team-a"},
		" team-a, ,team-b": {"team-a", "team-b"},
	}
	for in, want := range cases {
		if got := splitNamespaces(in); !slices.Equal(got, want) {
			t.Errorf("splitNamespaces(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseFlags(t *testing.T) {
	t.Setenv("WATCH_NAMESPACE", "dev,staging")
	t.Setenv("WATCHES_FILE", "/opt/cloudspace/watches.yaml")
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("POD_NAMESPACE", "operators")
	o, err := parseFlags([]string{"--metrics-bind-address=:8443"})
	if err != nil {
		t.Fatal(err)
	}
	if o.leaderElect {
		t.Error("leader election is on outside a cluster; want off by default")
	}
	if !slices.Equal(o.watchNamespaces, []string{"dev", "staging"}) {
		t.Errorf("namespaces = %q", o.watchNamespaces)
	}
	// OLM's Deployment sets POD_NAMESPACE: the Lease lives there, also for the CSV's command
	// line run outside the cluster.
	if o.watchesFile != "/opt/cloudspace/watches.yaml" || o.metricsAddr != ":8443" || !o.metricsSecure || o.leaderElectionNS != "operators" {
		t.Errorf("options = %+v", o)
	}
	opts, err := managerOptions(o)
	if err != nil {
		t.Fatal(err)
	}
	if len(opts.Cache.DefaultNamespaces) != 2 || opts.Metrics.FilterProvider == nil {
		t.Errorf("manager options: namespaces %v, metrics filter set %v", opts.Cache.DefaultNamespaces, opts.Metrics.FilterProvider != nil)
	}
	if _, err := parseFlags([]string{"--no-such-flag"}); err == nil {
		t.Error("an unknown flag was accepted")
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
	bindFlags(&options{}).VisitAll(func(f *flag.Flag) {
		if strings.HasPrefix(f.Name, "zap-") {
			return
		}
		if !strings.Contains(string(doc), "`--"+f.Name+"`") {
			t.Errorf("--%s is not in the flag table of docs/operations.md", f.Name)
		}
	})
}
