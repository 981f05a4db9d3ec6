package plugin

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
)

// serviceRef is a Service port that an in-cluster workspace URL names:
// http://NAME.NAMESPACE.svc:PORT/PATH (the operator's status.url without an Ingress).
type serviceRef struct {
	Namespace string
	Name      string
	Port      int32
	Path      string
}

// parseServiceURL reads an in-cluster Service URL. It answers false for anything else (an
// Ingress's https URL above all), which ws open then prints as it is: only a URL of exactly
// this form can be turned into a Service lookup without guessing.
func parseServiceURL(raw string) (serviceRef, bool) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "http" || u.User != nil || u.Port() == "" {
		return serviceRef{}, false
	}
	host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	rest, ok := strings.CutSuffix(host, ".svc.cluster.local")
	if !ok {
		if rest, ok = strings.CutSuffix(host, ".svc"); !ok {
			return serviceRef{}, false
		}
	}
	name, namespace, ok := strings.Cut(rest, ".")
	if !ok || len(validation.IsDNS1123Label(name)) > 0 || len(validation.IsDNS1123Label(namespace)) > 0 {
		return serviceRef{}, false
	}
	port, err := strconv.ParseUint(u.Port(), 10, 16)
	if err != nil || port == 0 {
		return serviceRef{}, false
	}
	path := u.EscapedPath()
	if path == "" {
		path = "/"
	}
	return serviceRef{Namespace: namespace, Name: name, Port: int32(port), Path: path}, true
}

// pickPod chooses the pod to forward to among those the Service selects: a Running, Ready pod
// that is not being deleted, as the Service itself would send traffic to. The Deployment is
// Recreate with one replica, so there is one at most; sorting by name keeps a rare second
// one (a manual scale-up) from making the choice random.
func pickPod(pods []corev1.Pod) (*corev1.Pod, bool) {
	var ready []*corev1.Pod
	for i := range pods {
		if podServes(&pods[i]) {
			ready = append(ready, &pods[i])
		}
	}
	if len(ready) == 0 {
		return nil, false
	}
	slices.SortFunc(ready, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return ready[0], true
}

// podServes: Running, Ready and not terminating, which is when a Service routes to a pod.
func podServes(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// targetPort maps the Service port the URL names to the pod's port, which is what a
// port-forward needs: it reaches the pod, not the Service. The workspace chart names its
// targetPort ("http"), so a name is looked up in the pod's containers.
func targetPort(svc *corev1.Service, pod *corev1.Pod, port int32) (int32, error) {
	i := slices.IndexFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Port == port })
	if i < 0 {
		return 0, fmt.Errorf("Service %s/%s has no port %d", svc.Namespace, svc.Name, port)
	}
	sp := svc.Spec.Ports[i]
	if sp.Protocol != "" && sp.Protocol != corev1.ProtocolTCP {
		return 0, fmt.Errorf("Service %s/%s port %d is %s; a port-forward carries TCP only", svc.Namespace, svc.Name, port, sp.Protocol)
	}
	switch {
	case sp.TargetPort.Type == intstr.String:
		return containerPort(pod, sp.TargetPort.StrVal)
	case sp.TargetPort.IntVal != 0:
		return sp.TargetPort.IntVal, nil
	}
	// An omitted targetPort is the port itself.
	return sp.Port, nil
}

// containerPort finds a named TCP port among the pod's containers.
func containerPort(pod *corev1.Pod, name string) (int32, error) {
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.Name == name && (p.Protocol == "" || p.Protocol == corev1.ProtocolTCP) {
				return p.ContainerPort, nil
			}
		}
	}
	return 0, fmt.Errorf("pod %s/%s has no TCP port named %q", pod.Namespace, pod.Name, name)
}

// localURL is where the browser reaches the forwarded IDE. A wildcard address listens on
// loopback too, and loopback is what to put in a browser: it is a secure context over plain
// http, where another address of this machine is not.
func localURL(address string, port uint16, path string) string {
	host := address
	if ip := net.ParseIP(address); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, strconv.Itoa(int(port))) + path
}

// validListenAddress: what the forwarder can listen on, an IP or "localhost" (it refuses
// host names), checked before anything is dialled so a typo is a usage error.
func validListenAddress(address string) bool {
	return address == "localhost" || net.ParseIP(address) != nil
}
