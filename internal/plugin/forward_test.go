package plugin

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/cloudspace-dev/cloudspace-operator/pkg/workspacev1"
)

// TestParseServiceURL: only the operator's in-cluster form is forwarded; an Ingress URL, or
// anything that cannot be read as a Service port without guessing, is printed as it is.
func TestParseServiceURL(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want serviceRef
		ok   bool
	}{
		{"http://alice-go.cloudspace-workspaces.svc:8080/", serviceRef{"cloudspace-workspaces", "alice-go", 8080, "/"}, true},
		{"http://alice-go.team-a.svc.cluster.local:8080/", serviceRef{"team-a", "alice-go", 8080, "/"}, true},
		{"http://ws.ns.svc:1024", serviceRef{"ns", "ws", 1024, "/"}, true},
		{"http://ws.ns.svc:8080/sub/path/", serviceRef{"ns", "ws", 8080, "/sub/path/"}, true},
		{"http://WS.NS.svc.:8080/", serviceRef{"ns", "ws", 8080, "/"}, true},
		{"https://alice.example.com/", serviceRef{}, false},    // an Ingress
		{"https://alice-go.ns.svc:8080/", serviceRef{}, false}, // TLS to the pod: not ours to rewrite to http
		{"http://alice-go.ns.svc/", serviceRef{}, false},       // no port
		{"http://alice-go.ns.svc:0/", serviceRef{}, false},     // port 0
		{"http://alice-go.ns.svc:70000/", serviceRef{}, false}, // port out of range
		{"http://alice-go.svc:8080/", serviceRef{}, false},     // no namespace
		{"http://a.b.c.svc:8080/", serviceRef{}, false},        // a namespace with a dot
		{"http://a_b.ns.svc:8080/", serviceRef{}, false},       // not a DNS label
		{"http://alice-go.ns.svc.example.com:8080/", serviceRef{}, false},
		{"http://user:pw@alice-go.ns.svc:8080/", serviceRef{}, false},
		{"http://10.96.0.10:8080/", serviceRef{}, false},
		{"", serviceRef{}, false},
		{"::not a url", serviceRef{}, false},
	} {
		got, ok := parseServiceURL(tc.url)
		if ok != tc.ok || got != tc.want {
			t.Errorf("%q: %+v %v, want %+v %v", tc.url, got, ok, tc.want, tc.ok)
		}
	}
}

func pod(name string, phase corev1.PodPhase, ready, terminating bool) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Status: corev1.PodStatus{Phase: phase}}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}, {Type: corev1.PodReady, Status: status}}
	if terminating {
		p.DeletionTimestamp = &metav1.Time{}
	}
	return p
}

// TestPickPod: the pod a Service would route to (Running, Ready, not terminating), the same
// one every time.
func TestPickPod(t *testing.T) {
	for _, tc := range []struct {
		name string
		pods []corev1.Pod
		want string
	}{
		{"none", nil, ""},
		{"not ready", []corev1.Pod{pod("a", corev1.PodRunning, false, false)}, ""},
		{"terminating", []corev1.Pod{pod("a", corev1.PodRunning, true, true)}, ""},
		{"pending", []corev1.Pod{pod("a", corev1.PodPending, true, false)}, ""},
		{"no ready condition", []corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}}, ""},
		{"the ready one", []corev1.Pod{pod("a", corev1.PodRunning, true, true), pod("b", corev1.PodRunning, true, false), pod("c", corev1.PodRunning, false, false)}, "b"},
		{"by name", []corev1.Pod{pod("z", corev1.PodRunning, true, false), pod("m", corev1.PodRunning, true, false)}, "m"},
	} {
		name := ""
		if got, ok := pickPod(tc.pods); ok {
			name = got.Name
		}
		if name != tc.want {
			t.Errorf("%s: picked %q, want %q", tc.name, name, tc.want)
		}
	}
}

// TestTargetPort: the Service port in the URL becomes the pod's port, by number or by the
// name the workspace chart uses ("http").
func TestTargetPort(t *testing.T) {
	ide := pod("ide", corev1.PodRunning, true, false)
	ide.Spec.Containers = []corev1.Container{
		{Name: "sidecar", Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: 9090, Protocol: corev1.ProtocolUDP}}},
		{Name: "ide", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}},
	}
	svc := func(sp corev1.ServicePort) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "ws", Namespace: "ns"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{sp}}}
	}
	for _, tc := range []struct {
		name string
		svc  *corev1.Service
		port int32
		want int32
		err  string
	}{
		{"named", svc(corev1.ServicePort{Port: 80, TargetPort: intstr.FromString("http"), Protocol: corev1.ProtocolTCP}), 80, 8080, ""},
		{"number", svc(corev1.ServicePort{Port: 80, TargetPort: intstr.FromInt32(9000)}), 80, 9000, ""},
		{"omitted", svc(corev1.ServicePort{Port: 8080}), 8080, 8080, ""},
		{"no such service port", svc(corev1.ServicePort{Port: 80}), 8080, 0, "has no port 8080"},
		{"no such named port", svc(corev1.ServicePort{Port: 80, TargetPort: intstr.FromString("web")}), 80, 0, `no TCP port named "web"`},
		{"named UDP port", svc(corev1.ServicePort{Port: 80, TargetPort: intstr.FromString("metrics")}), 80, 0, `no TCP port named "metrics"`},
		{"UDP service port", svc(corev1.ServicePort{Port: 53, Protocol: corev1.ProtocolUDP}), 53, 0, "TCP only"},
	} {
		got, err := targetPort(tc.svc, &ide, tc.port)
		if got != tc.want || (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s: %d, %v; want %d, %q", tc.name, got, err, tc.want, tc.err)
		}
	}
}

// TestLocalURL: the URL to put in a browser is on loopback when the forward listens on all
// addresses, and brackets an IPv6 address.
func TestLocalURL(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1": "http://127.0.0.1:41234/",
		"0.0.0.0":   "http://127.0.0.1:41234/",
		"::":        "http://127.0.0.1:41234/",
		"::1":       "http://[::1]:41234/",
		"localhost": "http://localhost:41234/",
	} {
		if got := localURL(addr, 41234, "/"); got != want {
			t.Errorf("%s: %s, want %s", addr, got, want)
		}
	}
	for addr, want := range map[string]bool{"127.0.0.1": true, "::1": true, "localhost": true, "my-host": false, "": false} {
		if validListenAddress(addr) != want {
			t.Errorf("validListenAddress(%q) = %v", addr, !want)
		}
	}
}

// TestKubeErrorNamesTheRight: a refusal says which right the kubeconfig's user lacks, all
// the forward needs, and that an Ingress URL needs none.
func TestKubeErrorNamesTheRight(t *testing.T) {
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "ide", errors.New(`User "bob" cannot create resource "pods/portforward"`))
	err := kubeError(forbidden, "create", "pods/portforward", "team-a", "ide")
	for _, want := range []string{"the right to create pods/portforward in namespace team-a", neededRights, "a URL through an Ingress needs none", `User "bob"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v: does not say %q", err, want)
		}
	}
	if codeOf(err) != ExitDenied {
		t.Errorf("forbidden: exit %d, want %d", codeOf(err), ExitDenied)
	}
	notFound := apierrors.NewNotFound(schema.GroupResource{Resource: "services"}, "ws")
	if err := kubeError(notFound, "get", "services", "ns", "ws"); codeOf(err) != ExitNotFound {
		t.Errorf("no Service: %v (exit %d), want exit %d", err, codeOf(err), ExitNotFound)
	}
	if err := kubeError(errors.New("connection refused"), "list", "pods", "ns", "ws"); codeOf(err) != ExitFailed ||
		!strings.Contains(err.Error(), "list pods ns/ws: connection refused") {
		t.Errorf("other: %v (exit %d)", err, codeOf(err))
	}
}

// TestPrintForwarded: the table's first line is "URL: <local url>" with one space, for a
// script reading stdout through a pipe; with -o json stdout holds the object alone.
func TestPrintForwarded(t *testing.T) {
	access := &workspacev1.WorkspaceAccess{Url: "http://ws.ns.svc:8080/", Password: "pw", Rotation: 2}
	fw := &forwarding{target: forwardTarget{Namespace: "ns", Pod: "ws-abc", Port: 8080}, local: 41234}
	var out, errOut bytes.Buffer
	o := &wsOptions{globals: &globals{output: "table", stdout: &out, stderr: &errOut}}
	if err := o.printForwarded(access, fw, "http://127.0.0.1:41234/", "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	want := "URL: http://127.0.0.1:41234/\nPassword: pw\nRotation: 2\n" +
		"Forwarding 127.0.0.1:41234 to port 8080 of pod ns/ws-abc until interrupted (Ctrl-C)\n"
	if out.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", out.String(), want)
	}

	out.Reset()
	o.output = "json"
	if err := o.printForwarded(access, fw, "http://127.0.0.1:41234/", "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	var got openOutput
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("json: %v\n%s", err, out.String())
	}
	if got.LocalURL != "http://127.0.0.1:41234/" || got.URL != access.Url || got.Password != "pw" || got.Forward.Pod != "ws-abc" {
		t.Errorf("json: %+v", got)
	}
	if !strings.Contains(errOut.String(), "until interrupted") {
		t.Errorf("stderr %q lacks the forwarding note", errOut.String())
	}
}
