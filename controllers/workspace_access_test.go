package controllers

import (
	"slices"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
)

// accessValues renders the access and ingress values of a workspace with this UID and rotation.
func accessValues(t *testing.T, cfg WorkspaceConfig, uid types.UID, rotation int64, ing *infrav1alpha1.WorkspaceIngress) (map[string]any, error) {
	t.Helper()
	ws := testWorkspace(true, infrav1alpha1.WorkspaceStatus{})
	ws.UID, ws.Spec.Access.Rotation, ws.Spec.Ingress = uid, rotation, ing
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ws)
	if err != nil {
		t.Fatal(err)
	}
	return WorkspaceLifecycle{WorkspaceConfig: cfg}.Values(&unstructured.Unstructured{Object: obj})
}

func password(t *testing.T, vals map[string]any) string {
	t.Helper()
	p, _, _ := unstructured.NestedString(vals, "access", "password")
	return p
}

// TestWorkspaceAccessPassword: every workspace renders a password of its own, a rotation gives
// a new one, the same workspace always renders the same one, and without a key none renders.
func TestWorkspaceAccessPassword(t *testing.T) {
	cfg := goldenWorkspaceConfig
	base, err := accessValues(t, cfg, "uid-1", 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p := password(t, base); len(p) < 32 {
		t.Fatalf("password %q is shorter than 32 characters", p)
	}
	other := cfg
	other.AccessKey = []byte(strings.Repeat("x", 32))
	for _, tc := range []struct {
		name     string
		cfg      WorkspaceConfig
		uid      types.UID
		rotation int64
		same     bool
	}{
		{name: "same workspace again", cfg: cfg, uid: "uid-1", rotation: 0, same: true},
		{name: "another workspace", cfg: cfg, uid: "uid-2", rotation: 0, same: false},
		{name: "rotated", cfg: cfg, uid: "uid-1", rotation: 1, same: false},
		{name: "another operator key", cfg: other, uid: "uid-1", rotation: 0, same: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vals, err := accessValues(t, tc.cfg, tc.uid, tc.rotation, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := password(t, vals) == password(t, base); got != tc.same {
				t.Errorf("same password as uid-1 at rotation 0: %v, want %v", got, tc.same)
			}
		})
	}
	if _, err := accessValues(t, WorkspaceConfig{}, "uid-1", 0, nil); err == nil || !strings.Contains(err.Error(), "access key") {
		t.Errorf("no key: err = %v, want a refusal naming the access key", err)
	}
}

// TestWorkspaceIngressTLS: an ingress always has a TLS Secret (the workspace's own name when
// the spec names none) and the admin's annotations.
func TestWorkspaceIngressTLS(t *testing.T) {
	for _, tc := range []struct {
		name, tlsSecret, want string
	}{
		{name: "default secret", want: "alice-go-tls"},
		{name: "named secret", tlsSecret: "wildcard-ide", want: "wildcard-ide"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vals, err := accessValues(t, goldenWorkspaceConfig, "uid-1", 0, &infrav1alpha1.WorkspaceIngress{Host: "a.example.com", TLSSecretName: tc.tlsSecret})
			if err != nil {
				t.Fatal(err)
			}
			if got, _, _ := unstructured.NestedString(vals, "ingress", "tlsSecretName"); got != tc.want {
				t.Errorf("tlsSecretName = %q, want %q", got, tc.want)
			}
			if got, _, _ := unstructured.NestedString(vals, "ingress", "annotations", "cert-manager.io/cluster-issuer"); got != "letsencrypt" {
				t.Errorf("issuer annotation = %q, want the operator's", got)
			}
		})
	}
}

// TestWorkspaceIDETrustingTheGateway: with --workspace-ide-auth=gateway the IDE asks no
// password (code-server --auth none, no PASSWORD, no password Secret), its NetworkPolicy
// admits only the access-labelled pods of its namespace and the operator's manager, and a
// workspace with an Ingress, which would let anyone in, does not render; the default asks the
// workspace's password.
func TestWorkspaceIDETrustingTheGateway(t *testing.T) {
	gateway := goldenWorkspaceConfig
	gateway.IDEAuth = IDEAuthGateway
	for _, tc := range []struct {
		cfg      WorkspaceConfig
		auth     string
		password bool
	}{{goldenWorkspaceConfig, "password", true}, {gateway, "none", false}} {
		var kinds []string
		var args []string
		var env []string
		for _, o := range renderCR(t, "workspace", WorkspaceLifecycle{WorkspaceConfig: tc.cfg}, "Workspace", "{owner: alice}") {
			kinds = append(kinds, o.GetKind())
			if o.GetKind() == "Deployment" {
				containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
				ide := containers[0].(map[string]any)
				args, _, _ = unstructured.NestedStringSlice(ide, "args")
				vars, _, _ := unstructured.NestedSlice(ide, "env")
				for _, v := range vars {
					env = append(env, v.(map[string]any)["name"].(string))
				}
			}
		}
		joined := strings.Join(args, " ")
		if !strings.Contains(joined, "--auth "+tc.auth) || slices.Contains(env, "PASSWORD") != tc.password || slices.Contains(kinds, "Secret") != tc.password {
			t.Errorf("IDEAuth %q: args %q, env %v, children %v; want --auth %s, a password %v", tc.cfg.IDEAuth, joined, env, kinds, tc.auth, tc.password)
		}
	}
	np := &networkingv1.NetworkPolicy{}
	renderChild(t, "workspace", WorkspaceLifecycle{WorkspaceConfig: gateway}, "Workspace", "{owner: alice}", np)
	if from := np.Spec.Ingress[0].From; len(np.Spec.Ingress) != 1 || len(from) != 2 || from[0].NamespaceSelector != nil ||
		from[0].PodSelector.MatchLabels["infra.cloudspace.dev/workspace-access"] != "true" || from[1].PodSelector.MatchLabels["control-plane"] != "controller-manager" {
		t.Errorf("the gateway-trusting IDE's NetworkPolicy admits %+v, want the access-labelled pods of its namespace and the operator's manager alone", np.Spec.Ingress)
	}
	_, err := accessValues(t, gateway, "uid-1", 0, &infrav1alpha1.WorkspaceIngress{Host: "alice.ide.example.com"})
	if err == nil || !strings.Contains(err.Error(), "spec.ingress") || !strings.Contains(err.Error(), "--workspace-ide-auth=gateway") {
		t.Errorf("an Ingress with the gateway trusted: %v, want it refused naming spec.ingress and the flag", err)
	}
}
