package integration

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/test/framework"
)

// TestGenericDaemonSchemaRejectsInvalidObjects proves the real API server enforces the
// project's CRD schema and CEL rules, and that every rejection names the field.
func TestGenericDaemonSchemaRejectsInvalidObjects(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name      string
		spec      infrav1alpha1.GenericDaemonSpec
		wantField string
		wantMsg   string
	}{
		{"missing image", infrav1alpha1.GenericDaemonSpec{Label: "logs"}, "spec.image", "should be at least 1 chars long"},
		{"image with space", infrav1alpha1.GenericDaemonSpec{Image: "busy box"}, "spec.image", "must not contain spaces"},
		{"bad label", infrav1alpha1.GenericDaemonSpec{Image: "busybox", Label: "=oops"}, "spec.label", "should match"},
		{"label clashes with nodeSelector", infrav1alpha1.GenericDaemonSpec{
			Image: "busybox", Label: "logs=true", NodeSelector: map[string]string{"logs": "false"},
		}, "spec.label", "must not name the same node label key"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			gd := &infrav1alpha1.GenericDaemon{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("invalid-%d", i), Namespace: "default"},
				Spec:       tc.spec,
			}
			err := k8sClient.Create(ctx, gd)
			if !apierrors.IsInvalid(err) {
				t.Fatalf("create: got %v, want an Invalid error", err)
			}
			if !strings.Contains(err.Error(), tc.wantField) || !strings.Contains(err.Error(), tc.wantMsg) {
				t.Fatalf("error %q does not name field %q with %q", err, tc.wantField, tc.wantMsg)
			}
		})
	}

	valid := &infrav1alpha1.GenericDaemon{
		ObjectMeta: metav1.ObjectMeta{Name: "syslog", Namespace: "default"},
		Spec:       infrav1alpha1.GenericDaemonSpec{Image: "mbessler/syslogdocker", Label: "logs"},
	}
	if err := k8sClient.Create(ctx, valid); err != nil {
		t.Fatalf("creating a valid GenericDaemon: %v", err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), valid) })
}

// TestWorkspaceSchemaAgreesWithTheAPI runs the table the gRPC API is also tested with against
// the CRD: each invalid value is refused naming its field; each valid one is accepted.
func TestWorkspaceSchemaAgreesWithTheAPI(t *testing.T) {
	ns := newNamespace(t)
	for i, tc := range framework.WorkspaceCases {
		err := createWorkspaceCase(t, ns, i, caseValue(tc), strings.Split(strings.TrimPrefix(tc.Path, "spec."), ".")...)
		switch {
		case tc.Valid && err != nil:
			t.Errorf("%s = %q: refused (%v), want accepted", tc.Path, tc.Value, err)
		case !tc.Valid && (err == nil || !strings.Contains(err.Error(), tc.Path)):
			t.Errorf("%s = %q: %v, want refused naming %s", tc.Path, tc.Value, err, tc.Path)
		}
	}
}

// caseValue is the case's value as the resource carries it: ports are numbers.
func caseValue(tc framework.WorkspaceCase) any {
	if n, err := strconv.ParseInt(tc.Value, 10, 64); err == nil && tc.Field == "port" {
		return n
	}
	return tc.Value
}

// TestWorkspaceSchemaRefusesWhatItsGoTypeCannotHold: a Workspace whose value its Go type cannot
// hold never starts, and a typed list of Workspaces fails on it (the gRPC API decodes each
// Workspace on its own for that reason: TestAWorkspaceStoredBeforeTheCRDRefusedItHarmsNoOtherTenant
// in test/e2e). So the CRD refuses every such value at create, naming the field, and what it
// accepts lists typed.
func TestWorkspaceSchemaRefusesWhatItsGoTypeCannotHold(t *testing.T) {
	ns := newNamespace(t)
	cases := []struct {
		name  string
		path  []string
		value any
		valid bool
	}{
		{"duration", []string{"startTimeout"}, "90s", true},
		{"not a duration", []string{"startTimeout"}, "soon", false},
		{"negative duration", []string{"startTimeout"}, "-5m", false},
		{"field reference", []string{"env"}, []any{map[string]any{"name": "NODE", "valueFrom": map[string]any{
			"fieldRef": map[string]any{"fieldPath": "spec.nodeName"},
		}}}, true},
		{"resource reference, divisor Go cannot parse", []string{"env"}, []any{resourceEnv("1e1.5")}, false},
	}
	for i, tc := range cases {
		err := createWorkspaceCase(t, ns, i, tc.value, tc.path...)
		field := "spec." + strings.Join(tc.path, ".")
		switch {
		case tc.valid && err != nil:
			t.Errorf("%s: %s = %v refused (%v), want accepted", tc.name, field, tc.value, err)
		case !tc.valid && (err == nil || !strings.Contains(err.Error(), field)):
			t.Errorf("%s: %s = %v: %v, want refused naming %s", tc.name, field, tc.value, err, field)
		}
	}
	var list infrav1alpha1.WorkspaceList
	if err := k8sClient.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatalf("the Workspaces the CRD accepted do not decode: %v", err)
	}
}

func resourceEnv(divisor string) map[string]any {
	return map[string]any{"name": "MEM", "valueFrom": map[string]any{"resourceFieldRef": map[string]any{
		"containerName": "ide", "resource": "limits.memory", "divisor": divisor,
	}}}
}

// createWorkspaceCase creates Workspace case-<i> in ns, owned by erin, with value at the spec
// path, and returns what the API server said.
func createWorkspaceCase(t *testing.T, ns string, i int, value any, path ...string) error {
	t.Helper()
	spec := map[string]any{"owner": "erin"}
	if err := unstructured.SetNestedField(spec, value, path...); err != nil {
		t.Fatal(err)
	}
	ws := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	ws.SetGroupVersionKind(infrav1alpha1.GroupVersion.WithKind("Workspace"))
	ws.SetNamespace(ns)
	ws.SetName(fmt.Sprintf("case-%d", i))
	return k8sClient.Create(context.Background(), ws)
}
