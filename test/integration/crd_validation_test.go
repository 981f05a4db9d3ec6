package integration

import (
	"context"
	"encoding/json"
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

// boundCase is one value past a bound of a kind's CRD: the API server must refuse it, naming
// path and saying msg. A hostile tenant's only way to make the operator hold large objects is
// through such values (each object is held several times in the operator's memory).
type boundCase struct {
	name, kind string
	spec       map[string]any
	path, msg  string
	objName    string // the object's name; "bound-<i>" when empty
}

func repeat(s string, n int) string { return strings.Repeat(s, n) }

// envOf is a list of n env variables named V<i>, each with value.
func envOf(n int, value string) []any {
	env := make([]any, n)
	for i := range env {
		env[i] = map[string]any{"name": fmt.Sprintf("V%d", i), "value": value}
	}
	return env
}

func stringsOf(n int, s string) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = s
	}
	return out
}

func tolerationsOf(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = map[string]any{"key": fmt.Sprintf("k%d", i), "operator": "Exists"}
	}
	return out
}

func mapOf(n int, value string) map[string]any {
	m := map[string]any{}
	for i := range n {
		m[fmt.Sprintf("k%d", i)] = value
	}
	return m
}

var sshKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB"

var overBounds = []boundCase{
	{name: "workspace env name", kind: "Workspace", spec: map[string]any{"env": []any{map[string]any{"name": repeat("N", 129), "value": "x"}}}, path: "spec.env", msg: "128"},
	{name: "workspace env value", kind: "Workspace", spec: map[string]any{"env": envOf(1, repeat("v", 8193))}, path: "spec.env", msg: "8192"},
	{name: "workspace env text", kind: "Workspace", spec: map[string]any{"env": envOf(3, repeat("v", 6000))}, path: "spec.env", msg: "16384"},
	{name: "workspace env of 64 values of 20 KB", kind: "Workspace", spec: map[string]any{"env": envOf(64, repeat("v", 20000))}, path: "spec.env", msg: "8192"},
	{name: "workspace env two sources", kind: "Workspace", spec: map[string]any{"env": []any{map[string]any{"name": "A", "valueFrom": map[string]any{
		"configMapKeyRef": map[string]any{"name": "c", "key": "k"}, "fieldRef": map[string]any{"fieldPath": "metadata.name"}}}}}, path: "spec.env", msg: "exactly one source"},
	{name: "workspace cpu", kind: "Workspace", spec: map[string]any{"resources": map[string]any{"cpu": "0." + repeat("0", 62) + "1"}}, path: "spec.resources.cpu", msg: "64"},
	{name: "workspace storage class", kind: "Workspace", spec: map[string]any{"storage": map[string]any{"storageClassName": repeat("s", 254)}}, path: "spec.storage.storageClassName", msg: "253"},
	{name: "workspace ingress class", kind: "Workspace", spec: map[string]any{"ingress": map[string]any{"host": "ide.example", "className": repeat("c", 254)}}, path: "spec.ingress.className", msg: "253"},
	{name: "workspace start timeout", kind: "Workspace", spec: map[string]any{"startTimeout": repeat("0", 62) + "1s"}, path: "spec.startTimeout", msg: "32"},
	{name: "workspace name", kind: "Workspace", objName: repeat("w", 64), spec: map[string]any{}, path: "metadata.name", msg: "63"},
	{name: "workspace name with a dot", kind: "Workspace", objName: "my.ide", spec: map[string]any{}, path: "metadata.name", msg: "Service"},

	{name: "vm grace period of ten years", kind: "VirtualMachine", spec: map[string]any{"shutdownGracePeriod": "87600h"}, path: "spec.shutdownGracePeriod", msg: "1h"},
	{name: "vm negative grace period", kind: "VirtualMachine", spec: map[string]any{"shutdownGracePeriod": "-10s"}, path: "spec.shutdownGracePeriod", msg: "1h"},
	{name: "vm grace period just over", kind: "VirtualMachine", spec: map[string]any{"shutdownGracePeriod": "1h0m1s"}, path: "spec.shutdownGracePeriod", msg: "1h"},
	{name: "vm ssh key", kind: "VirtualMachine", spec: map[string]any{"cloudInit": map[string]any{"sshAuthorizedKeys": []any{sshKey + repeat("A", 4097-len(sshKey))}}}, path: "spec.cloudInit.sshAuthorizedKeys", msg: "4096"},
	{name: "vm ssh keys in all", kind: "VirtualMachine", spec: map[string]any{"cloudInit": map[string]any{"sshAuthorizedKeys": stringsOf(5, sshKey+repeat("A", 4000-len(sshKey)))}}, path: "spec.cloudInit.sshAuthorizedKeys", msg: "16384"},
	{name: "vm memory", kind: "VirtualMachine", spec: map[string]any{"memory": repeat("0", 64) + "1Gi"}, path: "spec.memory", msg: "64"},
	{name: "vm disk size", kind: "VirtualMachine", spec: map[string]any{"disk": map[string]any{"size": repeat("0", 64) + "1Gi"}}, path: "spec.disk.size", msg: "64"},
	{name: "vm root disk size", kind: "VirtualMachine", spec: map[string]any{"rootDisk": map[string]any{"size": repeat("0", 64) + "1Gi"}}, path: "spec.rootDisk.size", msg: "64"},
	{name: "vm root disk storage class", kind: "VirtualMachine", spec: map[string]any{"rootDisk": map[string]any{"storageClassName": repeat("s", 254)}}, path: "spec.rootDisk.storageClassName", msg: "253"},
	{name: "vm name", kind: "VirtualMachine", objName: repeat("v", 64), spec: map[string]any{}, path: "metadata.name", msg: "63"},
	{name: "vm name starting with a digit", kind: "VirtualMachine", objName: "1vm", spec: map[string]any{}, path: "metadata.name", msg: "Service"},

	{name: "daemon name", kind: "GenericDaemon", objName: repeat("d", 64), spec: map[string]any{}, path: "metadata.name", msg: "63"},
	{name: "daemon env value", kind: "GenericDaemon", spec: map[string]any{"env": envOf(1, repeat("v", 8193))}, path: "spec.env", msg: "8192"},
	{name: "daemon env items", kind: "GenericDaemon", spec: map[string]any{"env": envOf(65, "v")}, path: "spec.env", msg: "64"},
	{name: "daemon env secret name", kind: "GenericDaemon", spec: map[string]any{"env": []any{map[string]any{"name": "S", "valueFrom": map[string]any{
		"secretKeyRef": map[string]any{"name": repeat("s", 17000), "key": "k"}}}}}, path: "spec.env", msg: "16384"},
	{name: "daemon command items", kind: "GenericDaemon", spec: map[string]any{"command": stringsOf(33, "x")}, path: "spec.command", msg: "32"},
	{name: "daemon command item", kind: "GenericDaemon", spec: map[string]any{"command": stringsOf(1, repeat("x", 4097))}, path: "spec.command[0]", msg: "4096"},
	{name: "daemon command in all", kind: "GenericDaemon", spec: map[string]any{"command": stringsOf(2, repeat("x", 4000))}, path: "spec.command", msg: "4096"},
	{name: "daemon args items", kind: "GenericDaemon", spec: map[string]any{"args": stringsOf(129, "x")}, path: "spec.args", msg: "128"},
	{name: "daemon args in all", kind: "GenericDaemon", spec: map[string]any{"args": stringsOf(3, repeat("x", 4000))}, path: "spec.args", msg: "8192"},
	{name: "daemon node selector entries", kind: "GenericDaemon", spec: map[string]any{"nodeSelector": mapOf(17, "v")}, path: "spec.nodeSelector", msg: "16"},
	{name: "daemon node selector value", kind: "GenericDaemon", spec: map[string]any{"nodeSelector": mapOf(1, repeat("v", 64))}, path: "spec.nodeSelector", msg: "63"},
	{name: "daemon tolerations", kind: "GenericDaemon", spec: map[string]any{"tolerations": []any{map[string]any{"key": repeat("k", 318), "operator": "Exists"}}}, path: "spec.tolerations", msg: "317"},
	{name: "daemon tolerations items", kind: "GenericDaemon", spec: map[string]any{"tolerations": tolerationsOf(17)}, path: "spec.tolerations", msg: "16"},
	{name: "daemon resources", kind: "GenericDaemon", spec: map[string]any{"resources": map[string]any{"limits": mapOf(9, "1")}}, path: "spec.resources", msg: "8"},
	{name: "daemon update strategy", kind: "GenericDaemon", spec: map[string]any{"updateStrategy": map[string]any{"type": "RollingUpdate",
		"rollingUpdate": map[string]any{"maxUnavailable": repeat("1", 40) + "%"}}}, path: "spec.updateStrategy", msg: "16"},
}

// TestSizeBoundsRefuseOversizedSpecs: every free-form field of every kind has a bound, and a
// value one past it is refused at admission naming the field and the bound, so that no
// tenant's object can grow the operator's memory beyond what the bounds allow.
func TestSizeBoundsRefuseOversizedSpecs(t *testing.T) {
	ns := newNamespace(t)
	for i, tc := range overBounds {
		t.Run(tc.name, func(t *testing.T) {
			name := tc.objName
			if name == "" {
				name = fmt.Sprintf("bound-%d", i)
			}
			err := createBoundCase(ns, tc.kind, name, tc.spec)
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.path) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("got %v; want Invalid naming %s and %q", err, tc.path, tc.msg)
			}
		})
	}
}

// createBoundCase creates a paused object of kind named name in ns with spec over the kind's
// minimal valid spec, and returns what the API server said.
func createBoundCase(ns, kind, name string, spec map[string]any) error {
	base := map[string]map[string]any{
		"Workspace":      {"owner": "erin"},
		"VirtualMachine": {"runStrategy": "Halted", "backend": "pod"},
		"GenericDaemon":  {"image": "busybox"},
	}[kind]
	full := map[string]any{}
	for k, v := range base {
		full[k] = v
	}
	for k, v := range spec {
		full[k] = v
	}
	u := &unstructured.Unstructured{Object: map[string]any{"spec": full}}
	u.SetGroupVersionKind(infrav1alpha1.GroupVersion.WithKind(kind))
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetAnnotations(map[string]string{infrav1alpha1.PauseAnnotation: "true"})
	return k8sClient.Create(context.Background(), u)
}

// maxSpecBytes is the most JSON one spec of any kind may take once every bound is used up.
const maxSpecBytes = 64 << 10

// TestLargestAdmittedSpecsStaySmall: a tenant who fills every field of a kind up to its bound
// is admitted, and the spec stays under maxSpecBytes: the bounds, not the API server's 3 MiB
// request limit, decide how much one object costs the operator (which holds each several times).
func TestLargestAdmittedSpecsStaySmall(t *testing.T) {
	ns := newNamespace(t)
	for kind, spec := range map[string]map[string]any{
		"Workspace": largestWorkspace(), "GenericDaemon": largestDaemon(), "VirtualMachine": largestVM(),
	} {
		name := repeat("m", 62) + "x" // the longest name every kind admits
		if err := createBoundCase(ns, kind, name, spec); err != nil {
			t.Errorf("%s: the largest spec within the bounds was refused: %v", kind, err)
			continue
		}
		raw, err := json.Marshal(spec)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: the largest admitted spec is %d bytes", kind, len(raw))
		if len(raw) > maxSpecBytes {
			t.Errorf("%s: the largest admitted spec is %d bytes, more than %d", kind, len(raw), maxSpecBytes)
		}
	}
}

// padded is prefix followed by fill up to n characters.
func padded(prefix string, n int, fill string) string {
	return prefix + repeat(fill, n-len(prefix))
}

// largestEnv is 64 variables whose names and references use up the 16 KiB of env text, with
// the most JSON around each.
func largestEnv() []any {
	env := make([]any, 64)
	for i := range env {
		env[i] = map[string]any{"name": padded(fmt.Sprintf("N%02d", i), 128, "x"), "valueFrom": map[string]any{
			"configMapKeyRef": map[string]any{"name": repeat("c", 64), "key": repeat("k", 64), "optional": false}}}
	}
	return env
}

func largestWorkspace() map[string]any {
	q := func(unit string) string { return padded("", 64-len(unit)-1, "0") + "1" + unit }
	return map[string]any{
		"owner": repeat("e", 63), "image": repeat("i", 512), "port": int64(8080), "running": false,
		"resources": map[string]any{"cpu": q(""), "memory": q("Gi")},
		"storage":   map[string]any{"size": q("Gi"), "storageClassName": repeat("s", 253), "reclaimPolicy": "Retain"},
		"git":       map[string]any{"url": padded("https://", 2048, "u"), "ref": repeat("r", 255)},
		"env":       largestEnv(),
		"ingress":   map[string]any{"host": repeat("h", 253), "className": repeat("c", 253), "tlsSecretName": repeat("t", 253)},
		"access":    map[string]any{"rotation": int64(1)}, "startTimeout": padded("", 30, "0") + "5m",
	}
}

func largestDaemon() map[string]any {
	key := func(i int) string { return repeat("p", 253) + "/" + padded(fmt.Sprintf("k%02d", i), 63, "k") }
	selector, limits, requests := map[string]any{}, map[string]any{}, map[string]any{}
	var tolerations, claims []any
	for i := range 16 {
		selector[key(i)] = repeat("v", 63)
		tolerations = append(tolerations, map[string]any{"key": key(i), "operator": "Equal", "value": repeat("v", 63), "effect": "NoSchedule", "tolerationSeconds": int64(1)})
	}
	for i := range 8 {
		limits[key(i)], requests[key(i)] = padded("", 63, "0")+"1", padded("", 63, "0")+"1"
	}
	for i := range 4 {
		claims = append(claims, map[string]any{"name": padded(fmt.Sprintf("c%d", i), 63, "c"), "request": repeat("r", 63)})
	}
	return map[string]any{
		"image": repeat("i", 512), "label": repeat("l", 253) + "/" + repeat("b", 63),
		"nodeSelector": selector, "tolerations": tolerations,
		"resources": map[string]any{"limits": limits, "requests": requests, "claims": claims},
		"command":   stringsOf(32, repeat("c", 128)), "args": stringsOf(128, repeat("a", 64)),
		"env": largestEnv(),
		"updateStrategy": map[string]any{"type": "RollingUpdate", "rollingUpdate": map[string]any{
			"maxUnavailable": repeat("1", 15) + "%", "maxSurge": repeat("1", 15) + "%"}},
	}
}

func largestVM() map[string]any {
	keys := stringsOf(4, sshKey+repeat("A", 4096-len(sshKey)))
	var ports []any
	for i := range 32 {
		ports = append(ports, map[string]any{"name": padded(fmt.Sprintf("p%02d", i), 15, "a"), "port": int64(1000 + i), "protocol": "UDP"})
	}
	return map[string]any{
		"cpu": "8", "memory": padded("", 60, "0") + "1Gi",
		// An image reference is at most 255 characters of name and 128 of tag (the webhook parses it).
		"image": "registry.example/" + repeat("a", 200) + ":" + repeat("t", 128), "firmware": "UEFI",
		"cpuModel": "A" + repeat("a", 127), "runStrategy": "Halted", "backend": "pod", "stopAction": "Hibernate",
		"rootDisk":  map[string]any{"persistence": "Persistent", "size": padded("", 60, "0") + "10Gi", "storageClassName": repeat("s", 253)},
		"disk":      map[string]any{"size": padded("", 60, "0") + "10Gi", "storageClassName": repeat("s", 253), "reclaimPolicy": "Retain"},
		"cloudInit": map[string]any{"userData": padded("#cloud-config\n# ", 32768, "x"), "sshAuthorizedKeys": keys},
		"ports":     ports, "shutdownGracePeriod": padded("", 29, "0") + "60s",
	}
}
