package plugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
)

// neededRights is everything the port-forward asks of the kubeconfig's user, said whenever one
// of them is refused so that an administrator grants them at once rather than one per try.
const neededRights = "get services, list pods and create pods/portforward"

// forwardTarget is the pod port a forward reaches: the one behind the workspace's Service.
type forwardTarget struct {
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	Port      int32  `json:"port"`
}

// resolveTarget finds, as the kubeconfig's user, the pod and port behind the Service the URL
// names. A port-forward reaches a pod, never a Service, so this is what kubectl port-forward
// svc/NAME does too.
func resolveTarget(ctx context.Context, cs kubernetes.Interface, ref serviceRef) (forwardTarget, error) {
	svc, err := cs.CoreV1().Services(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		return forwardTarget{}, kubeError(err, "get", "services", ref.Namespace, ref.Name)
	}
	// An empty selector would list every pod of the namespace.
	if len(svc.Spec.Selector) == 0 {
		return forwardTarget{}, withCode(ExitFailed, "Service %s/%s selects no pods: nothing to forward to", ref.Namespace, ref.Name)
	}
	sel := labels.SelectorFromSet(svc.Spec.Selector).String()
	pods, err := cs.CoreV1().Pods(ref.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return forwardTarget{}, kubeError(err, "list", "pods", ref.Namespace, ref.Name)
	}
	pod, ok := pickPod(pods.Items)
	if !ok {
		return forwardTarget{}, withCode(ExitFailed, "no Ready pod behind Service %s/%s: is the workspace running? (kubectl cloudspace ws start %s --wait)",
			ref.Namespace, ref.Name, ref.Name)
	}
	port, err := targetPort(svc, pod, ref.Port)
	if err != nil {
		return forwardTarget{}, withCode(ExitFailed, "finding the IDE's port behind %s:%d: %w", ref.Name, ref.Port, err)
	}
	return forwardTarget{Namespace: ref.Namespace, Pod: pod.Name, Port: port}, nil
}

// kubeError says what a refused Kubernetes call means here. The forward runs as the
// kubeconfig's user, not as the workspace API's, so a refusal names the one right that user
// lacks, and that an Ingress URL would need none.
func kubeError(err error, verb, resource, namespace, name string) error {
	switch {
	case apierrors.IsForbidden(err):
		return withCode(ExitDenied, "forwarding a port to the workspace needs the right to %s %s in namespace %s, which your kubeconfig's user lacks "+
			"(it needs %s there; a URL through an Ingress needs none): %w", verb, resource, namespace, neededRights, err)
	case apierrors.IsUnauthorized(err):
		return withCode(ExitDenied, "the cluster refused your kubeconfig's credentials (%s %s in %s): %w", verb, resource, namespace, err)
	case apierrors.IsNotFound(err) && resource == "services":
		return withCode(ExitNotFound, "the workspace's Service %s/%s does not exist: %w", namespace, name, err)
	}
	return withCode(ExitFailed, "%s %s %s/%s: %w", verb, resource, namespace, name, err)
}

// recordingDialer keeps the dial's own error: the forwarder flattens it into text, and only
// the typed error tells a refused pods/portforward (403) from a broken connection.
type recordingDialer struct {
	httpstream.Dialer
	err error
}

func (d *recordingDialer) Dial(protocols ...string) (httpstream.Connection, string, error) {
	conn, protocol, err := d.Dialer.Dial(protocols...)
	d.err = err
	return conn, protocol, err
}

// podDialer upgrades a POST to the pod's portforward subresource to SPDY, as kubectl
// port-forward does; POST is what RBAC checks as "create pods/portforward".
func podDialer(cfg *rest.Config, cs kubernetes.Interface, t forwardTarget) (*recordingDialer, error) {
	transport, upgrader, err := spdy.RoundTripperFor(cfg)
	if err != nil {
		return nil, err
	}
	u := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(t.Namespace).Name(t.Pod).SubResource("portforward").URL()
	return &recordingDialer{Dialer: spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, u)}, nil
}

// forwarding is a port-forward that listens: its local port, and how to end it.
type forwarding struct {
	target forwardTarget
	local  uint16
	stop   chan struct{}
	done   chan error
}

// startForward dials the pod, listens on address:port and returns once connections to it are
// forwarded, so that the URL printed next works the moment it is read; ctx bounds the wait.
func startForward(ctx context.Context, cfg *rest.Config, cs kubernetes.Interface, t forwardTarget, oo openOptions, errOut io.Writer) (*forwarding, error) {
	dialer, err := podDialer(cfg, cs, t)
	if err != nil {
		return nil, withCode(ExitFailed, "forwarding to pod %s/%s: %w", t.Namespace, t.Pod, err)
	}
	f := &forwarding{target: t, stop: make(chan struct{}), done: make(chan error, 1)}
	ready := make(chan struct{})
	ports := []string{fmt.Sprintf("%d:%d", oo.port, t.Port)}
	// Its "Forwarding from" and per-connection lines are left out: stdout holds only what
	// ws open prints, for a script to parse.
	fw, err := portforward.NewOnAddresses(dialer, []string{oo.address}, ports, f.stop, ready, io.Discard, errOut)
	if err != nil {
		return nil, withCode(ExitUsage, "forwarding from %s port %d: %w", oo.address, oo.port, err)
	}
	go func() { f.done <- fw.ForwardPorts() }()
	select {
	case <-ready:
	case err := <-f.done:
		return nil, f.failed(err, dialer.err)
	case <-ctx.Done():
		close(f.stop)
		return nil, withCode(ExitFailed, "the forward to pod %s/%s was not ready (interrupted, or not within --timeout): %w", t.Namespace, t.Pod, ctx.Err())
	}
	forwarded, err := fw.GetPorts()
	if err != nil || len(forwarded) == 0 {
		return nil, withCode(ExitFailed, "forwarding to pod %s/%s: no local port: %v", t.Namespace, t.Pod, err)
	}
	f.local = forwarded[0].Local
	return f, nil
}

// failed explains a forward that ended before it listened: a refused dial names the right.
func (f *forwarding) failed(err, dialErr error) error {
	t := f.target
	if dialErr != nil {
		return kubeError(dialErr, "create", "pods/portforward", t.Namespace, t.Pod)
	}
	return withCode(ExitFailed, "forwarding to pod %s/%s port %d: %w", t.Namespace, t.Pod, t.Port, err)
}

// wait forwards until ctx ends (Ctrl-C, SIGTERM), which is how a forward is meant to end, so
// it is no error; a connection lost on the way (the IDE stopped or restarted) is one.
func (f *forwarding) wait(ctx context.Context) error {
	select {
	case <-ctx.Done():
		close(f.stop)
		<-f.done
		return nil
	case err := <-f.done:
		if err == nil {
			err = errors.New("the forward ended")
		}
		return withCode(ExitFailed, "forwarding to pod %s/%s: %w (did the workspace stop or restart? run ws open again)", f.target.Namespace, f.target.Pod, err)
	}
}
