package realcluster

import (
	"context"
	"fmt"
	"time"
)

// StartDNS runs CoreDNS as every cluster does: pods labelled k8s-app=kube-dns in kube-system
// behind the kube-dns Service at DNSServiceIP, listening on port 53. A NetworkPolicy that
// admits DNS names exactly those pods and that port, so a DNS served any other way (a process
// on the node, another port behind the Service) would be refused by policies that work in real
// clusters. image is the pushed CoreDNS image.
func (l Layout) StartDNS(ctx context.Context, image string, log func(string, ...any)) error {
	start := time.Now()
	if err := l.apply(ctx, dnsManifests(image)); err != nil {
		return fmt.Errorf("installing CoreDNS: %w", err)
	}
	if out, err := l.kubectl(ctx, "", "-n", "kube-system", "rollout", "status", "deployment/coredns", "--timeout=2m"); err != nil {
		return fmt.Errorf("CoreDNS did not become available: %w\n%s", err, out)
	}
	log("%5.1fs CoreDNS running at %s", time.Since(start).Seconds(), DNSServiceIP)
	return nil
}

// dnsManifests are CoreDNS's service account, its read access to Services and endpoints, its
// configuration, Deployment and Service. It binds port 53 as a non-root user through the
// unprivileged-port sysctl, which restricted pod security allows.
func dnsManifests(image string) string {
	return `apiVersion: v1
kind: ServiceAccount
metadata: {name: coredns, namespace: kube-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "system:coredns"}
rules:
- apiGroups: [""]
  resources: [endpoints, services, pods, namespaces]
  verbs: [list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "system:coredns"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:coredns"}
subjects: [{kind: ServiceAccount, name: coredns, namespace: kube-system}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: coredns, namespace: kube-system}
data:
  Corefile: |
    .:53 {
        errors
        health :8080
        ready :8181
        kubernetes ` + ClusterDomain + ` in-addr.arpa ip6.arpa {
            pods insecure
            fallthrough in-addr.arpa ip6.arpa
        }
        cache 5
    }
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: coredns, namespace: kube-system, labels: {k8s-app: kube-dns}}
spec:
  replicas: 1
  selector: {matchLabels: {k8s-app: kube-dns}}
  template:
    metadata: {labels: {k8s-app: kube-dns}}
    spec:
      serviceAccountName: coredns
      priorityClassName: system-cluster-critical
      dnsPolicy: Default
      securityContext:
        runAsNonRoot: true
        runAsUser: 65532
        seccompProfile: {type: RuntimeDefault}
        sysctls: [{name: net.ipv4.ip_unprivileged_port_start, value: "53"}]
      containers:
      - name: coredns
        image: ` + image + `
        args: [-conf, /etc/coredns/Corefile]
        ports:
        - {name: dns, containerPort: 53, protocol: UDP}
        - {name: dns-tcp, containerPort: 53, protocol: TCP}
        readinessProbe: {httpGet: {path: /ready, port: 8181}, periodSeconds: 2}
        livenessProbe: {httpGet: {path: /health, port: 8080}}
        resources: {requests: {cpu: 50m, memory: 64Mi}, limits: {memory: 170Mi}}
        securityContext:
          allowPrivilegeEscalation: false
          readOnlyRootFilesystem: true
          capabilities: {drop: [ALL]}
        volumeMounts: [{name: config, mountPath: /etc/coredns, readOnly: true}]
      volumes: [{name: config, configMap: {name: coredns}}]
---
apiVersion: v1
kind: Service
metadata: {name: kube-dns, namespace: kube-system, labels: {k8s-app: kube-dns}}
spec:
  clusterIP: ` + DNSServiceIP + `
  selector: {k8s-app: kube-dns}
  ports:
  - {name: dns, port: 53, protocol: UDP}
  - {name: dns-tcp, port: 53, protocol: TCP}
`
}
