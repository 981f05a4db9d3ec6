package main

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/cloudspace-dev/cloudspace-operator/internal/grpcapi"
	"github.com/cloudspace-dev/cloudspace-operator/pkg/pb"
	"github.com/cloudspace-dev/cloudspace-operator/pkg/workspacev1"
	"github.com/cloudspace-dev/cloudspace-operator/test/framework"
)

const (
	wsFloorNamespace    = "bench-pods"
	wsVolumeNamespace   = "bench-pods-volume"
	wsChildrenNamespace = "bench-pods-children"
	wsNamespace         = "bench-workspaces"
	benchUser           = "bench"
	benchToken          = "bench-token"
	apiNamespace        = "bench-api"
	apiSecret           = "api-tokens"
)

// Latency is the spread of per-call times of one phase.
type Latency struct {
	N       int     `json:"n"`
	P50     float64 `json:"p50Seconds"`
	P99     float64 `json:"p99Seconds"`
	Max     float64 `json:"maxSeconds"`
	Seconds float64 `json:"wallSeconds"`
}

func latency(samples []time.Duration, wall time.Duration) Latency {
	slices.Sort(samples)
	at := func(q float64) float64 { return samples[int(q*float64(len(samples)-1))].Seconds() }
	return Latency{N: len(samples), P50: at(0.50), P99: at(0.99), Max: at(1), Seconds: wall.Seconds()}
}

// grpcFlags prepares what the operator needs to serve the API for the bench and returns its flags.
func (b *bench) grpcFlags(ctx context.Context) ([]string, error) {
	for _, ns := range []string{apiNamespace, wsNamespace, wsFloorNamespace, wsVolumeNamespace, wsChildrenNamespace} {
		if err := b.namespace(ctx, ns); err != nil {
			return nil, err
		}
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: apiNamespace, Name: apiSecret}, StringData: map[string]string{benchUser: benchToken}}
	if err := b.c.Create(ctx, secret); err != nil {
		return nil, err
	}
	var err error
	if b.tls, err = framework.NewTLSFiles(b.work); err != nil {
		return nil, err
	}
	port, err := framework.FreePort()
	if err != nil {
		return nil, err
	}
	b.grpcAddr = fmt.Sprintf("127.0.0.1:%d", port)
	if b.portalToken, err = b.portal(ctx); err != nil {
		return nil, err
	}
	// Every quota at its default: each of the portal's users creates one workspace.
	return []string{"--grpc-bind-address=" + b.grpcAddr, "--grpc-tls-cert-file=" + b.tls.Cert, "--grpc-tls-key-file=" + b.tls.Key,
		"--grpc-token-secret=" + apiNamespace + "/" + apiSecret, "--workspace-namespaces=" + wsNamespace,
		"--workspace-access-key-secret=" + apiNamespace + "/access-key"}, nil
}

// portal makes the portal's ServiceAccount, lets it impersonate every user, and returns a token
// of it: the bench's creates are a portal's, for as many users.
func (b *bench) portal(ctx context.Context) (string, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: apiNamespace, Name: "portal"}}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "bench-portal"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"users"}, Verbs: []string{"impersonate"}}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "bench-portal"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: apiNamespace, Name: sa.Name}}}
	for _, obj := range []client.Object{sa, role, binding} {
		if err := b.c.Create(ctx, obj); err != nil {
			return "", fmt.Errorf("creating the portal's %T: %w", obj, err)
		}
	}
	return framework.ServiceAccountToken(ctx, b.c, sa)
}

// benchUserOf is the end user the portal creates workspace i for.
func benchUserOf(i int) string { return fmt.Sprintf("dev-%d", i) }

// floorShape is what a floor makes for each of its N workspaces, directly, with no operator.
type floorShape int

const (
	// podOnly is the IDE's Deployment alone.
	podOnly floorShape = iota
	// withVolume adds its PersistentVolumeClaim: the workspace's shape, which the issue's
	// target compares create-and-wait with.
	withVolume
	// allChildren adds the rest of the kinds the workspace chart renders (a Secret, a Service,
	// a NetworkPolicy): what the cluster spends on a workspace's children, with nothing of ours.
	allChildren
)

func (s floorShape) String() string {
	return [...]string{"the Deployment alone", "with a PVC", "with every child"}[s]
}

// podsFloor creates N workspaces' objects of the given shape in ns at once, and measures, for
// each, the time from its first create call until its pod is ready. The caller removes them
// (removeNamespace), outside the measured phase.
func (b *bench) podsFloor(ctx context.Context, ns string, shape floorShape) (Latency, error) {
	fmt.Printf("bench: workspace floor: %d Deployments created directly in %s (%s)\n", b.o.workspaces, ns, shape)
	start := time.Now()
	began := make([]time.Time, b.o.workspaces)
	var wg sync.WaitGroup
	errs := make(chan error, b.o.workspaces)
	for i := range b.o.workspaces {
		wg.Go(func() {
			began[i] = time.Now()
			for _, obj := range idePod(ns, i, shape) {
				if err := b.c.Create(ctx, obj); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return Latency{}, err
	}
	ready := map[string]time.Time{}
	err := b.waitUntil(ctx, func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := b.c.List(ctx, &pods, client.InNamespace(ns)); err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			if _, seen := ready[p.Labels["ide"]]; !seen && podReady(&p) {
				ready[p.Labels["ide"]] = time.Now()
			}
		}
		return len(ready) == b.o.workspaces, nil
	})
	if err != nil {
		return Latency{}, err
	}
	samples := make([]time.Duration, 0, b.o.workspaces)
	for i := range b.o.workspaces {
		samples = append(samples, ready[fmt.Sprintf("ide-%d", i)].Sub(began[i]))
	}
	return latency(samples, time.Since(start)), nil
}

// floorPhase measures one floor and what it costs, and then removes what it made.
func (b *bench) floorPhase(ctx context.Context, ns string, shape floorShape) (Latency, Phase, error) {
	var l Latency
	cost, err := b.phaseOver(ctx, nil, b.o.workspaces, func() (err error) {
		l, err = b.podsFloor(ctx, ns, shape)
		return err
	})
	if err != nil {
		return Latency{}, Phase{}, err
	}
	return l, cost, b.removeNamespace(ctx, ns)
}

// idePod is the IDE's Deployment and, by shape, the other objects of a workspace, in the
// order the operator writes them: everything the Deployment's pod needs comes first.
func idePod(ns string, i int, shape floorShape) []client.Object {
	name := fmt.Sprintf("ide-%d", i)
	labels := map[string]string{"ide": name}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "ide", Image: "codercom/code-server:4.96.4", ImagePullPolicy: corev1.PullIfNotPresent,
					Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
				}}},
			},
		},
	}
	if shape == podOnly {
		return []client.Object{dep}
	}
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-home"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}},
		},
	}
	spec := &dep.Spec.Template.Spec
	spec.Volumes = []corev1.Volume{{Name: "home", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: pvc.Name}}}}
	spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "home", MountPath: "/home/coder"}}
	if shape == withVolume {
		return []client.Object{pvc, dep}
	}
	return append(ideNeighbours(ns, name, labels), pvc, dep)
}

// ideNeighbours are the workspace's Secret (the IDE's password), Service and NetworkPolicy
// (ingress to the IDE's port only, egress to DNS and the internet), as the chart renders them.
func ideNeighbours(ns, name string, labels map[string]string) []client.Object {
	meta := metav1.ObjectMeta{Namespace: ns, Name: name}
	port := intstr.FromString("http")
	private := []string{"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"}
	return []client.Object{
		&corev1.Secret{ObjectMeta: meta, StringData: map[string]string{"password": rand.Text()}},
		&corev1.Service{ObjectMeta: meta, Spec: corev1.ServiceSpec{Selector: labels,
			Ports: []corev1.ServicePort{{Name: "http", Port: 8080, TargetPort: port}}}},
		&networkingv1.NetworkPolicy{ObjectMeta: meta, Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: labels},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
			Ingress:     []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{{Port: &port}}}},
			Egress: []networkingv1.NetworkPolicyEgressRule{
				{Ports: []networkingv1.NetworkPolicyPort{{Protocol: ptr.To(corev1.ProtocolUDP), Port: ptr.To(intstr.FromInt32(53))}}},
				{To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0", Except: private}}}},
			},
		}},
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return p.Status.Phase == corev1.PodRunning
		}
	}
	return false
}

// createAndWait makes N concurrent createSpaceAndWaitForRunning calls with the legacy
// CloudIdeService's client, as a portal acting for N users (its ServiceAccount's token, one
// impersonated user a call), and splits their latency by what the bench saw meanwhile.
func (b *bench) createAndWait(ctx context.Context) (Latency, Timeline, error) {
	conns, err := b.dial(b.o.workspaces)
	if err != nil {
		return Latency{}, Timeline{}, err
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	fmt.Printf("bench: workspaces: %d concurrent createSpaceAndWaitForRunning calls on %d connections\n", b.o.workspaces, len(conns))
	seen, stop, err := b.watchTimeline(ctx, wsNamespace)
	if err != nil {
		return Latency{}, Timeline{}, err
	}
	defer stop()
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+b.portalToken)
	began, returned := make([]time.Time, b.o.workspaces), make([]time.Time, b.o.workspaces)
	errs := make(chan error, b.o.workspaces)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range b.o.workspaces {
		wg.Go(func() {
			callCtx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(ctx, workspacev1.ImpersonateUserMetadata, benchUserOf(i)), b.o.timeout)
			defer cancel()
			began[i] = time.Now()
			seed := pb.NewCloudIdeServiceClient(conns[i%len(conns)])
			_, err := seed.CreateSpaceAndWaitForRunning(callCtx, &pb.PodInfo{Name: benchWorkspace(i), Namespace: wsNamespace}, grpc.WaitForReady(true))
			returned[i] = time.Now()
			if err != nil {
				errs <- fmt.Errorf("%s: %w", benchWorkspace(i), err)
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return Latency{}, Timeline{}, err
	}
	wall := time.Since(start)
	samples := make([]time.Duration, b.o.workspaces)
	beganBy, returnedBy := map[string]time.Time{}, map[string]time.Time{}
	for i := range b.o.workspaces {
		samples[i] = returned[i].Sub(began[i])
		beganBy[benchWorkspace(i)], returnedBy[benchWorkspace(i)] = began[i], returned[i]
	}
	split, err := seen.split(ctx, beganBy, returnedBy, wall)
	return latency(samples, wall), split, err
}

func benchWorkspace(i int) string { return fmt.Sprintf("ws-%d", i) }

// dial opens as many connections as calls calls at once need, as the API asks a portal to: a
// connection carries at most --grpc-max-streams-per-connection calls at once (the default here),
// and a call past them waits for one to end, which would be the bench's wait, not the API's.
func (b *bench) dial(calls int) ([]*grpc.ClientConn, error) {
	pemCA, err := os.ReadFile(b.tls.CA)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pemCA)
	creds := credentials.NewTLS(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
	perConn := grpcapi.DefaultConfig().Conn.MaxStreamsPerConnection
	conns := make([]*grpc.ClientConn, (calls+perConn-1)/perConn)
	for i := range conns {
		if conns[i], err = grpc.NewClient(b.grpcAddr, grpc.WithTransportCredentials(creds)); err != nil {
			return nil, err
		}
	}
	return conns, nil
}
