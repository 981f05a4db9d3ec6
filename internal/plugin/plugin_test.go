package plugin

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	fakedynamic "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/cloudspace-dev/cloudspace-operator/pkg/workspacev1"
)

func codeOf(err error) int {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return -1
}

func labelledCRD(kind, group, plural string) *unstructured.Unstructured {
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": plural + "." + group, "labels": map[string]any{"app.kubernetes.io/part-of": "cloudspace-operator"}},
		"spec": map[string]any{"group": group, "names": map[string]any{"kind": kind, "plural": plural},
			"versions": []any{map[string]any{"name": "v1beta1", "storage": false}, map[string]any{"name": "v1", "storage": true}}},
	}}
	return crd
}

// TestServedKinds: the operator's kinds are those in the cloudspace category and those whose
// CRD carries the part-of label; a cluster with none has the CRDs not installed.
func TestServedKinds(t *testing.T) {
	dc := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{}}
	scheme := runtime.NewScheme()
	listKinds := map[schema.GroupVersionResource]string{crdResource: "CustomResourceDefinitionList"}
	dyn := fakedynamic.NewSimpleDynamicClientWithCustomListKinds(scheme, listKinds)
	_, err := servedKinds(context.Background(), dc, dyn)
	if codeOf(err) != ExitNotInstalled {
		t.Fatalf("no kinds: %v (exit %d), want exit %d", err, codeOf(err), ExitNotInstalled)
	}

	dc.Resources = []*metav1.APIResourceList{
		{GroupVersion: "infra.cloudspace.dev/v1alpha1", APIResources: []metav1.APIResource{
			{Name: "workspaces", Kind: "Workspace", ShortNames: []string{"ws"}, Categories: []string{"cloudspace"}},
			{Name: "workspaces/status", Kind: "Workspace", Categories: []string{"cloudspace"}},
		}},
		{GroupVersion: "apps/v1", APIResources: []metav1.APIResource{{Name: "deployments", Kind: "Deployment", Categories: []string{"all"}}}},
	}
	dyn = fakedynamic.NewSimpleDynamicClientWithCustomListKinds(scheme, listKinds, labelledCRD("Demo", "test.cloudspace.dev", "demos"))
	kinds, err := servedKinds(context.Background(), dc, dyn)
	if err != nil {
		t.Fatal(err)
	}
	if len(kinds) != 2 || kinds[0].Kind != "Workspace" || kinds[1].Kind != "Demo" || kinds[1].Version != "v1" || kinds[1].Resource != "demos" {
		t.Errorf("kinds = %+v, want Workspace (category) and Demo v1 (label)", kinds)
	}
}

// TestAPIErrorsBecomeExitCodes: scripts tell an unreachable API, a refused token, another
// user's workspace and a missing one apart by the exit code.
func TestAPIErrorsBecomeExitCodes(t *testing.T) {
	o := &wsOptions{api: "127.0.0.1:9443"}
	for code, want := range map[codes.Code]int{
		codes.Unavailable: ExitFailed, codes.DeadlineExceeded: ExitFailed, codes.Unauthenticated: ExitDenied,
		codes.PermissionDenied: ExitDenied, codes.NotFound: ExitNotFound, codes.InvalidArgument: ExitFailed,
	} {
		if got := codeOf(o.apiError(status.Error(code, "x"))); got != want {
			t.Errorf("%s: exit %d, want %d", code, got, want)
		}
	}
	if o.apiError(nil) != nil {
		t.Error("no error became one")
	}
}

// TestMainExitCodes: usage errors exit 2 and name what is wrong, before anything is dialled.
func TestMainExitCodes(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"bogus"}, ExitUsage, "unknown command"},
		{[]string{"kinds", "-o", "xml"}, ExitUsage, "use table, json or yaml"},
		{[]string{"tree", "gd"}, ExitUsage, "accepts 2 arg"},
		{[]string{"ws", "list"}, ExitUsage, "no workspace API address"},
		{[]string{"ws", "list", "--api", "127.0.0.1:1"}, ExitUsage, "no API token"},
		{[]string{"ws", "open", "x", "--port", "70000"}, ExitUsage, "--port 70000"},
		{[]string{"ws", "open", "x", "--address", "my-host"}, ExitUsage, "use an IP address or localhost"},
	} {
		var out, errOut bytes.Buffer
		t.Setenv(EnvAPI, "")
		t.Setenv(EnvToken, "")
		if code := Main(tc.args, &out, &errOut); code != tc.code || !strings.Contains(errOut.String(), tc.msg) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, errOut.String(), tc.code, tc.msg)
		}
	}
}

func TestPrintTree(t *testing.T) {
	root := Node{Kind: "GenericDaemon", Name: "syslog", Namespace: "ns", Status: "False", Reason: "Applying", Children: []Node{
		{Kind: "ServiceAccount", Name: "syslog", Namespace: "ns", Ready: true, Status: "Current"},
		{Kind: "DaemonSet", Name: "syslog", Namespace: "ns", Status: Missing, Message: "gone"},
	}}
	var buf bytes.Buffer
	w := tabwriter.NewWriter(&buf, 0, 0, 1, ' ', 0)
	printTree(w, root)
	w.Flush()
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 4 || strings.Join(strings.Fields(lines[2]), " ") != "ns ├─ ServiceAccount/syslog True Current" ||
		strings.Join(strings.Fields(lines[3]), " ") != "ns └─ DaemonSet/syslog False Missing gone" {
		t.Errorf("tree:\n%s", buf.String())
	}
	if allReady(root) {
		t.Error("a tree with a missing child is all ready")
	}
}

func TestStorageLine(t *testing.T) {
	gi := int64(1) << 30
	for _, tc := range []struct {
		u    *workspacev1.StorageUsage
		want string
	}{
		{&workspacev1.StorageUsage{UsedBytes: 15 * gi, KeptBytes: 5 * gi, BudgetBytes: 20 * gi}, "storage: 15Gi of 20Gi (5Gi kept after delete)"},
		{&workspacev1.StorageUsage{UsedBytes: 10 * gi}, "storage: 10Gi (0 kept after delete)"},
		{nil, "storage: 0 (0 kept after delete)"},
	} {
		if got := storageLine(tc.u); got != tc.want {
			t.Errorf("storageLine(%v) = %q, want %q", tc.u, got, tc.want)
		}
	}
}

func TestIdleFor(t *testing.T) {
	now := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		phase, lastUsed, want string
	}{
		{"Running", "2026-11-25T08:48:00Z", "12m"},
		{"Running", "2026-11-25T08:59:20Z", "40s"},
		{"Running", "", "-"},
		{"Stopped", "2026-11-25T08:48:00Z", "-"},
	} {
		ws := &workspacev1.Workspace{Phase: tc.phase, LastUsed: tc.lastUsed}
		if got := idleFor(ws, now); got != tc.want {
			t.Errorf("idleFor(%s, last used %q) = %q, want %q", tc.phase, tc.lastUsed, got, tc.want)
		}
	}
}
