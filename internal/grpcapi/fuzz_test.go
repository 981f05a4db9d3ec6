package grpcapi

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/workspace"
)

// The create calls of both services turn a request into a Workspace in three steps before they
// write anything: validate (what only the API knows), object (the Workspace), and admit (a
// taken name, the operator's limits, the CRD's rules through a dry run). These targets feed
// them arbitrary request fields; the cluster is a fake client holding nothing, so admit's
// answers are the limits'. Nothing panics; every refusal is InvalidArgument and starts with
// the request field at fault, as the caller's message spells it; an accepted request becomes
// the Workspace it asked for.

// FuzzLegacyCreateRequest is CloudIdeService.CreateSpaceAndWaitForRunning's PodInfo, which has
// no git URL and no retain flag.
func FuzzLegacyCreateRequest(f *testing.F) {
	f.Add("ws1", "", "codercom/code-server:4.96.4", uint32(8080), "1", "2Gi", "10Gi", "", false)
	f.Add("Ws_1", "ides", "", uint32(0), "", "", "", "", false)
	f.Add("ws1", "elsewhere", "", uint32(0), "", "", "", "", false)
	f.Add("ws1", "", "", uint32(0), "two", "", "", "", false)
	f.Add("ws1", "", "", uint32(1<<31), "9", "", "", "", false)
	fuzzCreateRequest(f, legacyFields)
}

// FuzzV1CreateRequest is cloudspace.v1.WorkspaceService.Create's Workspace.
func FuzzV1CreateRequest(f *testing.F) {
	f.Add("ws1", "team-b", "codercom/code-server:4.96.4", uint32(8080), "500m", "1Gi", "5Gi", "https://example.com/r.git", true)
	f.Add("a-workspace-name-longer-than-forty-five-characters", "", "", uint32(0), "", "", "", "", false)
	f.Add("ws1", "", "", uint32(0), "", "64Gi", "", "", false)
	f.Add("ws1", "", "", uint32(0), "", "", "1Pi", "git@example.com:r.git", true)
	fuzzCreateRequest(f, v1Fields)
}

// fuzzNamespaces are the namespaces the fuzzed API serves; the first is the default.
var fuzzNamespaces = []string{"ides", "team-b"}

func fuzzCreateRequest(f *testing.F, fs fields) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		f.Fatal(err)
	}
	if err := infrav1alpha1.AddToScheme(scheme); err != nil {
		f.Fatal(err)
	}
	cfg := testSettings(f, func(c *Config) { c.Namespaces = strings.Join(fuzzNamespaces, ",") })
	c := fake.NewClientBuilder().WithScheme(scheme).Build()
	w := newWorkspaces(c, c, c, nil, cfg, nil)
	f.Fuzz(func(t *testing.T, name, namespace, image string, port uint32, cpu, memory, storage, git string, retain bool) {
		if fs.git == "" {
			git, retain = "", false // not in this service's request
		}
		sp := spec{name: name, namespace: namespace, image: image, port: port, cpu: cpu, memory: memory, storage: storage, git: git, retain: retain}
		if err := w.validate(&sp, fs); err != nil {
			checkInvalid(t, err, fs)
			return
		}
		ws := sp.object("alice")
		checkWorkspace(t, sp, namespace, ws)
		if _, err := w.admit(context.Background(), "alice", ws, fs); err != nil {
			checkInvalid(t, err, fs)
		}
	})
}

// checkInvalid checks that err is InvalidArgument starting with one of the request's fields.
func checkInvalid(t *testing.T, err error, fs fields) {
	t.Helper()
	st, ok := status.FromError(err)
	field, _, _ := strings.Cut(st.Message(), ": ")
	names := []string{fs.name, fs.namespace, fs.image, fs.port, fs.cpu, fs.memory, fs.storage, fs.git}
	if !ok || st.Code() != codes.InvalidArgument || field == "" || !slices.Contains(names, field) {
		t.Fatalf("refusal %v is not InvalidArgument naming one of the request's fields %q", err, names)
	}
}

// checkWorkspace checks the Workspace made of an accepted request: a resource name, in the
// namespace asked for (the default for none), owned by the caller, with what the request
// asked, as the v1 API shows it back.
func checkWorkspace(t *testing.T, sp spec, namespace string, ws *infrav1alpha1.Workspace) {
	t.Helper()
	if errs := validation.IsDNS1123Label(ws.Name); len(errs) > 0 || len(ws.Name) > maxNameLength {
		t.Fatalf("accepted name %q: %v", ws.Name, errs)
	}
	if want := cmp.Or(namespace, fuzzNamespaces[0]); ws.Namespace != want {
		t.Fatalf("namespace %q for %q, want %q", ws.Namespace, namespace, want)
	}
	if ws.Spec.Owner != "alice" || ws.Labels[workspace.OwnerLabel] != "alice" {
		t.Fatalf("workspace of %q (label %q), want alice's", ws.Spec.Owner, ws.Labels[workspace.OwnerLabel])
	}
	got := toV1(ws)
	if got.Image != sp.image || got.Port != sp.port || got.GitUrl != sp.git || got.RetainStorage != sp.retain || !got.Running {
		t.Fatalf("request %+v became %+v", sp, got)
	}
	for _, q := range []struct{ asked, got string }{{sp.cpu, got.Cpu}, {sp.memory, got.Memory}, {sp.storage, got.Storage}} {
		if !sameQuantity(q.asked, q.got) {
			t.Fatalf("quantity %q became %q", q.asked, q.got)
		}
	}
}

// sameQuantity reports whether a and b are both unset or the same quantity.
func sameQuantity(a, b string) bool {
	if a == "" || b == "" {
		return a == b
	}
	qa, errA := resource.ParseQuantity(a)
	qb, errB := resource.ParseQuantity(b)
	return errA == nil && errB == nil && qa.Equal(qb)
}
