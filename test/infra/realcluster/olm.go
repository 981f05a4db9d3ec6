package realcluster

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// OLM is what StartOLM needs: OLM's CRDs and the images its catalog operator runs.
type OLM struct {
	// CRDs is the directory of OLM's CRDs (deploy/chart/crds of its module).
	CRDs string
	// UtilImage holds cpb (bundle unpacking); OPMImage holds opm.
	UtilImage, OPMImage string
}

// bootstrap creates what every cluster has: the default StorageClass, served by the provisioner.
func (l Layout) bootstrap(ctx context.Context) error {
	return l.apply(ctx, `apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: standard
  annotations: {storageclass.kubernetes.io/is-default-class: "true"}
provisioner: `+ProvisionerName+`
reclaimPolicy: Delete
volumeBindingMode: WaitForFirstConsumer
`)
}

// olmObjects are the namespaces and OperatorGroups of OLM's upstream install, its aggregated
// roles, and the package server's Service (endpoints on the node: it runs as a process there)
// and APIService.
func (l Layout) olmObjects() (string, error) {
	ca, err := os.ReadFile(l.CA())
	if err != nil {
		return "", err
	}
	return `apiVersion: v1
kind: Namespace
metadata: {name: olm}
---
apiVersion: v1
kind: Namespace
metadata: {name: operators}
---
apiVersion: operators.coreos.com/v1
kind: OperatorGroup
metadata: {name: global-operators, namespace: operators}
---
apiVersion: operators.coreos.com/v1
kind: OperatorGroup
metadata: {name: olm-operators, namespace: olm}
spec: {targetNamespaces: [olm]}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: packageserver, namespace: olm}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: olm-packageserver-auth-delegator}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: system:auth-delegator}
subjects: [{kind: ServiceAccount, name: packageserver, namespace: olm}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: olm-packageserver-auth-reader, namespace: kube-system}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: extension-apiserver-authentication-reader}
subjects: [{kind: ServiceAccount, name: packageserver, namespace: olm}]
---
apiVersion: v1
kind: Service
metadata: {name: packageserver-service, namespace: olm}
spec:
  ports: [{name: https, port: 5443, targetPort: 5443}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: packageserver-service-node
  namespace: olm
  labels: {kubernetes.io/service-name: packageserver-service}
addressType: IPv4
ports: [{name: https, port: 5443, protocol: TCP}]
endpoints: [{addresses: ["` + NodeIP + `"], conditions: {ready: true}}]
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: v1.packages.operators.coreos.com}
spec:
  group: packages.operators.coreos.com
  version: v1
  groupPriorityMinimum: 2000
  versionPriority: 15
  service: {name: packageserver-service, namespace: olm, port: 5443}
  caBundle: ` + base64.StdEncoding.EncodeToString(ca) + `
`, nil
}

// StartOLM installs OLM's CRDs and objects and starts its olm and catalog operators and its
// package server (what serves PackageManifests, the OperatorHub listing) as processes in the
// node, then waits until PackageManifests are served.
func (l Layout) StartOLM(ctx context.Context, o OLM, log func(string, ...any)) error {
	start := time.Now()
	if l.olmRunning(ctx) {
		log("%5.1fs OLM already running", time.Since(start).Seconds())
		return nil
	}
	if out, err := l.kubectl(ctx, "", "apply", "--server-side", "--force-conflicts", "-f", o.CRDs); err != nil {
		return fmt.Errorf("installing OLM's CRDs: %w\n%s", err, out)
	}
	if _, err := l.kubectl(ctx, "", "wait", "--for=condition=Established", "crd", "--all", "--timeout=60s"); err != nil {
		return err
	}
	objects, err := l.olmObjects()
	if err != nil {
		return err
	}
	if err := l.apply(ctx, objects); err != nil {
		return err
	}
	if err := l.writePackageServerToken(ctx); err != nil {
		return err
	}
	for _, d := range l.olmDaemons(o) {
		if err := l.start(d); err != nil {
			return err
		}
	}
	if err := l.waitPackageServer(ctx); err != nil {
		return fmt.Errorf("%w (logs in %s)", err, l.Path("logs"))
	}
	log("%5.1fs OLM running: olm, catalog and package server", time.Since(start).Seconds())
	return nil
}

// olmDaemons are OLM's three processes, as its upstream Deployments run them: olm serves its
// health over TLS only with a certificate, a key and a client CA.
func (l Layout) olmDaemons(o OLM) []daemon {
	tls := []string{"--tls-cert", l.Path("pki", "olm.crt"), "--tls-key", l.Path("pki", "olm.key"), "--client-ca", l.CA()}
	env := []string{"KUBECONFIG=" + l.NodeKubeconfig(), "OPERATOR_NAMESPACE=olm", "OPERATOR_NAME=olm-operator"}
	return []daemon{
		{name: "olm", node: NodeName, bin: l.Bin + "/olm", env: env, args: append([]string{"--namespace", "olm", "--writeStatusName", "",
			"--writePackageServerStatusName", ""}, tls...)},
		{name: "catalog", node: NodeName, bin: l.Bin + "/catalog", env: env, args: append([]string{"--namespace", "olm", "--writeStatusName", "",
			"--util-image", o.UtilImage, "--opmImage", o.OPMImage, "--set-workload-user-id=true"}, tls...)},
		// The package server takes its authorization from in-cluster configuration whatever its
		// flags say (OLM v0.33's server.go sets the authentication kubeconfig twice and the
		// authorization one never): the service account token of writePackageServerToken.
		{name: "package-server", node: NodeName, bin: l.Bin + "/package-server", args: []string{
			"--secure-port", "5443", "--bind-address", NodeIP, "--global-namespace", "olm",
			"--kubeconfig", l.NodeKubeconfig(), "--authentication-kubeconfig", l.NodeKubeconfig(),
			"--authorization-kubeconfig", l.NodeKubeconfig(),
			"--tls-cert-file", l.Path("pki", "packageserver.crt"), "--tls-private-key-file", l.Path("pki", "packageserver.key")},
			env: append(env, "KUBERNETES_SERVICE_HOST="+NodeIP, "KUBERNETES_SERVICE_PORT="+strconv.Itoa(APIPort))},
	}
}

// writePackageServerToken writes, where in-cluster clients read them in the node's mount
// namespace, a token of the package server's service account (allowed to delegate
// authentication and authorization, as OLM's install grants it), the CA and the namespace.
func (l Layout) writePackageServerToken(ctx context.Context) error {
	token, err := l.kubectl(ctx, "", "create", "token", "packageserver", "-n", "olm", "--duration", "720h")
	if err != nil {
		return fmt.Errorf("creating the package server's token: %w\n%s", err, token)
	}
	ca, err := os.ReadFile(l.CA())
	if err != nil {
		return err
	}
	dir := l.Path("node", "serviceaccount")
	for name, data := range map[string][]byte{"token": bytesTrim(token), "ca.crt": ca, "namespace": []byte("olm")} {
		if err := os.WriteFile(dir+"/"+name, data, 0o600); err != nil {
			return err
		}
	}
	return nil
}

func bytesTrim(b []byte) []byte { return []byte(strings.TrimSpace(string(b))) }

// olmRunning tells whether OLM's processes are alive and PackageManifests served.
func (l Layout) olmRunning(ctx context.Context) bool {
	running := l.running()
	for _, d := range l.olmDaemons(OLM{}) {
		if _, ok := running[d.name]; !ok {
			return false
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return l.waitPackageServer(ctx) == nil
}

func (l Layout) waitPackageServer(ctx context.Context) error {
	cs, err := l.clientset()
	if err != nil {
		return err
	}
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := cs.RESTClient().Get().AbsPath("/apis/packages.operators.coreos.com/v1/packagemanifests").DoRaw(ctx)
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("PackageManifests are not served: %w", err)
	}
	return nil
}

// apply applies manifests with kubectl's server-side apply.
func (l Layout) apply(ctx context.Context, manifests string) error {
	out, err := l.kubectl(ctx, manifests, "apply", "--server-side", "--force-conflicts", "-f", "-")
	if err != nil {
		return fmt.Errorf("applying: %w\n%s", err, out)
	}
	return nil
}

func (l Layout) kubectl(ctx context.Context, stdin string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, l.Bin+"/kubectl", append([]string{"--kubeconfig", l.Kubeconfig()}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	return cmd.CombinedOutput()
}
