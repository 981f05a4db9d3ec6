package controllers

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/engine"
)

// claimant is a Workspace of owner claiming host, created at the given second.
func claimant(ns, name, owner, host, uid string, second int) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"owner": owner, "ingress": map[string]any{"host": host},
	}}}
	u.SetGroupVersionKind(workspaceGVK)
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetUID(types.UID(uid))
	u.SetCreationTimestamp(metav1.NewTime(time.Date(2025, 1, 1, 0, 0, second, 0, time.UTC)))
	u.SetGeneration(1)
	return u
}

// tenancyOver is the Workspace lifecycle over a cache holding workspaces, indexed as Setup does.
func tenancyOver(t *testing.T, ingress WorkspaceIngressConfig, workspaces ...*unstructured.Unstructured) workspaceTenancy {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := infrav1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	idx := &unstructured.Unstructured{}
	idx.SetGroupVersionKind(workspaceGVK)
	b := fake.NewClientBuilder().WithScheme(scheme).WithIndex(idx, WorkspaceHostIndex, workspaceHost)
	for _, w := range workspaces {
		b = b.WithObjects(w.DeepCopy())
	}
	return workspaceTenancy{WorkspaceLifecycle: WorkspaceLifecycle{WorkspaceConfig: goldenWorkspaceConfig},
		ingress: ingress, workspaces: b.Build(), egress: EgressConfig{}.values()}
}

// TestAWorkspaceCannotTakeAnotherTenantsHost is the attacker's side: mallory, in her own
// namespace, asks for the host alice's earlier workspace is served at. Hers runs without an
// Ingress, Degraded with IngressHostConflict naming the field; alice's keeps its Ingress; and
// once alice's is gone, mallory's gets the host.
func TestAWorkspaceCannotTakeAnotherTenantsHost(t *testing.T) {
	alice := claimant("team-a", "ide", "alice", "alice.ide.example.com", "bbbb", 1)
	mallory := claimant("team-m", "ide", "mallory", "Alice.ide.example.com", "aaaa", 2)
	l := tenancyOver(t, WorkspaceIngressConfig{}, alice, mallory)

	if v, err := l.Values(mallory); err != nil || v["ingress"] != nil {
		t.Fatalf("mallory's values = ingress %v, %v; want no ingress", v["ingress"], err)
	}
	res, err := l.Status(mallory, engine.Observed{})
	if err != nil || !strings.HasPrefix(res.Failure, infrav1alpha1.ReasonIngressHostConflict+": spec.ingress.host: ") {
		t.Errorf("mallory's failure = %q, %v; want %s naming spec.ingress.host", res.Failure, err, infrav1alpha1.ReasonIngressHostConflict)
	}
	if strings.Contains(res.Failure, "alice") && !strings.Contains(res.Failure, `"alice.ide.example.com"`) {
		t.Errorf("the failure names the holder: %q", res.Failure)
	}
	if res.Fields["url"] != "http://ide.team-m.svc:8080/" || res.RequeueAfter != DefaultIngressHostRecheck {
		t.Errorf("url %v, requeue %s; want the in-cluster URL and a recheck", res.Fields["url"], res.RequeueAfter)
	}
	if v, err := l.Values(alice); err != nil || v["ingress"] == nil {
		t.Errorf("alice's values = ingress %v, %v; want hers", v["ingress"], err)
	}
	if res, _ := l.Status(alice, engine.Observed{}); res.Failure != "" {
		t.Errorf("alice's failure = %q", res.Failure)
	}
	// The holder is deleted: the next in line gets the host.
	if v, err := tenancyOver(t, WorkspaceIngressConfig{}, mallory).Values(mallory); err != nil || v["ingress"] == nil {
		t.Errorf("with alice's gone, mallory's values = ingress %v, %v; want hers", v["ingress"], err)
	}
}

// claimed records in w's status that it has held host since the given second.
func claimed(w *unstructured.Unstructured, host string, second int) *unstructured.Unstructured {
	w.Object["status"] = map[string]any{"ingressHost": host,
		"ingressHostClaimedAt": time.Date(2025, 1, 1, 0, 0, second, 0, time.UTC).Format(time.RFC3339)}
	return w
}

// TestAnOlderWorkspaceCannotMoveOntoAHeldHost is the attacker's side: mallory's workspace is
// older than alice's, and she moves its host onto the one alice's has been served at. The
// host is held by the workspace that claimed it first, not by the older one: mallory's is
// refused, alice's keeps its Ingress, and mallory's claim dates from her move.
func TestAnOlderWorkspaceCannotMoveOntoAHeldHost(t *testing.T) {
	mallory := claimed(claimant("team-m", "ide", "mallory", "alice.ide.example.com", "aaaa", 1), "mallory.ide.example.com", 1)
	mallory.SetGeneration(2)                                                        // her move
	alice := claimant("team-a", "ide", "alice", "alice.ide.example.com", "bbbb", 5) // not recorded yet
	l := tenancyOver(t, WorkspaceIngressConfig{}, mallory, alice)
	l.Now = func() time.Time { return time.Date(2025, 1, 1, 0, 1, 0, 0, time.UTC) }
	if v, err := l.Values(mallory); err != nil || v["ingress"] != nil {
		t.Fatalf("mallory's values = ingress %v, %v; want none: alice's claim is the earlier", v["ingress"], err)
	}
	if v, err := l.Values(alice); err != nil || v["ingress"] == nil {
		t.Fatalf("alice's values = ingress %v, %v; want hers", v["ingress"], err)
	}
	res, err := l.Status(mallory, engine.Observed{})
	if err != nil || res.Fields["ingressHost"] != "alice.ide.example.com" || res.Fields["ingressHostClaimedAt"] != "2025-01-01T00:01:00Z" {
		t.Errorf("mallory's claim = %v since %v, %v; want the new host since now", res.Fields["ingressHost"], res.Fields["ingressHostClaimedAt"], err)
	}
	res, _ = l.Status(alice, engine.Observed{})
	if res.Fields["ingressHostClaimedAt"] != "2025-01-01T00:00:05Z" {
		t.Errorf("alice's claim = %v, want her creation", res.Fields["ingressHostClaimedAt"])
	}
	alice = claimed(alice, "alice.ide.example.com", 5)
	mallory = claimed(mallory, "alice.ide.example.com", 60)
	if holder, err := tenancyOver(t, WorkspaceIngressConfig{}, mallory, alice).holder("alice.ide.example.com"); err != nil || holder.GetName() != "ide" || holder.GetNamespace() != "team-a" {
		t.Errorf("with both claims recorded, the holder = %v, %v; want alice's", holder, err)
	}
}

// TestIngressHostHolderOrder: oldest first, then the lower UID within the same second.
func TestIngressHostHolderOrder(t *testing.T) {
	a := claimant("n1", "a", "o", "h.example.com", "uid-2", 5)
	b := claimant("n2", "b", "o", "h.example.com", "uid-1", 5)
	c := claimant("n3", "c", "o", "h.example.com", "uid-0", 6)
	holder, err := tenancyOver(t, WorkspaceIngressConfig{}, a, b, c).holder("h.example.com")
	if err != nil || holder.GetName() != "b" {
		t.Errorf("holder = %v, %v; want b (same second as a, lower UID)", holder, err)
	}
}

// TestIngressHostPattern: with the admin's pattern, a host made for another owner is refused
// (naming the field), and a claim the pattern refuses holds the host for no one.
func TestIngressHostPattern(t *testing.T) {
	cfg := WorkspaceIngressConfig{HostPattern: "{owner}-{name}.ide.example.com"}
	squatter := claimant("team-m", "ide", "mallory", "alice-ide.ide.example.com", "aaaa", 1)
	alice := claimant("team-a", "ide", "alice", "alice-ide.ide.example.com", "bbbb", 2)
	l := tenancyOver(t, cfg, squatter, alice)
	v, _ := l.Values(squatter)
	res, _ := l.Status(squatter, engine.Observed{})
	if v["ingress"] != nil || !strings.HasPrefix(res.Failure, infrav1alpha1.ReasonIngressHostNotAllowed+": spec.ingress.host: ") {
		t.Errorf("squatter: ingress %v, failure %q; want no ingress and %s", v["ingress"], res.Failure, infrav1alpha1.ReasonIngressHostNotAllowed)
	}
	if res.RequeueAfter == DefaultIngressHostRecheck {
		t.Error("a host the pattern refuses is rechecked: only a spec change can fix it")
	}
	if v, _ := l.Values(alice); v["ingress"] == nil {
		t.Error("alice's own host is held by a claim the pattern refuses")
	}
	for _, bad := range []string{"{user}.example.com", "{owner}_{name}.example.com", "{owner}..example.com"} {
		if err := (WorkspaceIngressConfig{HostPattern: bad}).validate(); err == nil {
			t.Errorf("pattern %q accepted", bad)
		}
	}
	if err := cfg.validate(); err != nil {
		t.Error(err)
	}
}

// TestWithoutACacheOnlyThePatternIsChecked: Lifecycles(cfg), with no manager, still refuses a
// host the pattern refuses.
func TestWithoutACacheOnlyThePatternIsChecked(t *testing.T) {
	l := workspaceTenancy{WorkspaceLifecycle: WorkspaceLifecycle{WorkspaceConfig: goldenWorkspaceConfig},
		ingress: WorkspaceIngressConfig{HostPattern: "{name}.{namespace}.example.com"}}
	if v, err := l.Values(claimant("ns", "ide", "o", "ide.ns.example.com", "u", 1)); err != nil || v["ingress"] == nil {
		t.Errorf("a matching host: ingress %v, %v", v["ingress"], err)
	}
	if v, err := l.Values(claimant("ns", "ide", "o", "ide.other.example.com", "u", 1)); err != nil || v["ingress"] != nil {
		t.Errorf("a host for another namespace: ingress %v, %v; want none", v["ingress"], err)
	}
}
