package realnode

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cloudspace-dev/cloudspace-operator/test/framework"
	"github.com/cloudspace-dev/cloudspace-operator/test/infra/bundle"
	"github.com/cloudspace-dev/cloudspace-operator/test/infra/images"
)

const (
	// olmNS holds the catalogs every namespace sees, as OperatorHub's are.
	olmNS = "olm"
	// hubNS is where OLM's upstream install has an OperatorGroup for every namespace: where
	// OperatorHub installs operators.
	hubNS       = "operators"
	catalogName = "cloudspace-catalog"
)

// TestOperatorHubCatalog takes OperatorHub's path: an administrator adds the catalog image as
// a CatalogSource (OLM runs it as a registry pod pulled from the registry), the package is
// listed as the console lists it (PackageManifest), and a Subscription installs the channel's
// head from it (OLM unpacks the bundle image in a Job), configured through the Subscription.
func TestOperatorHubCatalog(t *testing.T) {
	ctx := context.Background()
	channels, err := bundle.ReadChannels(filepath.Join(framework.RepoRoot(), "bundle"))
	if err != nil {
		t.Fatal(err)
	}
	catalog := &operatorsv1alpha1.CatalogSource{
		ObjectMeta: metav1.ObjectMeta{Name: catalogName, Namespace: olmNS},
		Spec: operatorsv1alpha1.CatalogSourceSpec{
			SourceType: operatorsv1alpha1.SourceTypeGrpc, Image: ref(t, images.CatalogRepo+":v"+images.UpgradeVersion),
			DisplayName: "Cloudspace", Publisher: "Cloudspace",
			GrpcPodConfig: &operatorsv1alpha1.GrpcPodConfig{SecurityContextConfig: operatorsv1alpha1.Restricted},
		},
	}
	sub := &operatorsv1alpha1.Subscription{
		ObjectMeta: metav1.ObjectMeta{Name: bundle.Package, Namespace: hubNS},
		Spec: &operatorsv1alpha1.SubscriptionSpec{CatalogSource: catalogName, CatalogSourceNamespace: olmNS,
			Package: bundle.Package, Channel: channels.Default, InstallPlanApproval: operatorsv1alpha1.ApprovalAutomatic,
			// Configured as docs/operations.md tells an admin to: the IDEs trust the gateway.
			Config: &operatorsv1alpha1.SubscriptionConfig{Env: []corev1.EnvVar{gatewayAuthEnv}}},
	}
	t.Cleanup(func() { removeHubInstall(t, catalog, sub) })
	if err := k8sClient.Create(ctx, catalog); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 3*time.Minute, "the catalog's registry pod READY", func(ctx context.Context) error {
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(catalog), catalog); err != nil {
			return err
		}
		if s := catalog.Status.GRPCConnectionState; s == nil || s.LastObservedState != "READY" {
			return fmt.Errorf("connection %+v", s)
		}
		return nil
	})
	checkPackageManifest(t, channels)

	if err := k8sClient.Create(ctx, sub); err != nil {
		t.Fatal(err)
	}
	head := bundle.CSVName(images.UpgradeVersion)
	waitFor(t, 4*time.Minute, "the Subscription's CSV "+head+" Succeeded", func(ctx context.Context) error {
		csv := &operatorsv1alpha1.ClusterServiceVersion{}
		if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: hubNS, Name: head}, csv); err != nil {
			return err
		}
		if csv.Status.Phase != operatorsv1alpha1.CSVPhaseSucceeded {
			return fmt.Errorf("phase %s: %s", csv.Status.Phase, csv.Status.Message)
		}
		return nil
	})
	image := ref(t, images.OperatorRepo+":v"+images.UpgradeVersion)
	waitFor(t, 2*time.Minute, "the operator pod running from the catalog's bundle", func(ctx context.Context) error {
		var pods corev1.PodList
		if err := k8sClient.List(ctx, &pods, client.InNamespace(hubNS), client.MatchingLabels{"control-plane": "controller-manager"}); err != nil {
			return err
		}
		if len(pods.Items) != 1 || pods.Items[0].Spec.Containers[0].Image != image || !podReady(&pods.Items[0]) {
			return fmt.Errorf("pods %v", podStates(pods.Items))
		}
		return nil
	})
	t.Run("the Subscription's config.env has the IDEs trust the gateway, whose pods alone reach them", checkGatewayIDE)
}

// checkPackageManifest reads the package as the OperatorHub console does: from the package
// server, with its catalog, channel, head CSV and the CSV's display name, and its icon from the
// icon subresource (the listing itself carries none).
func checkPackageManifest(t *testing.T, channels bundle.Channels) {
	t.Helper()
	var pm struct {
		Status struct {
			CatalogSource  string `json:"catalogSource"`
			DefaultChannel string `json:"defaultChannel"`
			Channels       []struct {
				Name           string `json:"name"`
				CurrentCSV     string `json:"currentCSV"`
				CurrentCSVDesc struct {
					DisplayName string `json:"displayName"`
				} `json:"currentCSVDesc"`
			} `json:"channels"`
		} `json:"status"`
	}
	path := "/apis/packages.operators.coreos.com/v1/namespaces/" + hubNS + "/packagemanifests/" + bundle.Package
	waitFor(t, 2*time.Minute, "the PackageManifest of "+bundle.Package, func(ctx context.Context) error {
		raw, err := clientset.RESTClient().Get().AbsPath(path).DoRaw(ctx)
		if err != nil {
			return err
		}
		return json.Unmarshal(raw, &pm)
	})
	s := pm.Status
	if s.CatalogSource != catalogName || s.DefaultChannel != channels.Default || len(s.Channels) != len(channels.All) {
		t.Fatalf("PackageManifest status %+v, want default channel %s of %q", s, channels.Default, channels.All)
	}
	for _, ch := range s.Channels {
		if !slices.Contains(channels.All, ch.Name) || ch.CurrentCSV != bundle.CSVName(images.UpgradeVersion) || !strings.Contains(ch.CurrentCSVDesc.DisplayName, "Cloudspace") {
			t.Errorf("channel %s: head %s, display name %q", ch.Name, ch.CurrentCSV, ch.CurrentCSVDesc.DisplayName)
		}
	}
	icon, err := clientset.RESTClient().Get().AbsPath(path + "/icon").DoRaw(context.Background())
	if err != nil || !strings.Contains(string(icon), "<svg") {
		t.Errorf("the package's icon: %v %.100q", err, icon)
	}
}

// removeHubInstall deletes the Subscription, its CSV and the CatalogSource, as an
// administrator uninstalls from OperatorHub, and waits until the operator's pod is gone.
func removeHubInstall(t *testing.T, catalog *operatorsv1alpha1.CatalogSource, sub *operatorsv1alpha1.Subscription) {
	ctx := context.Background()
	for _, o := range []client.Object{sub, catalog} {
		if err := k8sClient.Delete(ctx, o); err != nil && !apierrors.IsNotFound(err) {
			t.Error(err)
		}
	}
	if err := k8sClient.DeleteAllOf(ctx, &operatorsv1alpha1.ClusterServiceVersion{}, client.InNamespace(hubNS),
		client.MatchingLabels{"operators.coreos.com/" + bundle.Package + "." + hubNS: ""}); err != nil {
		t.Error(err)
	}
	waitFor(t, 2*time.Minute, "the OperatorHub install removed", func(ctx context.Context) error {
		var pods corev1.PodList
		if err := k8sClient.List(ctx, &pods, client.InNamespace(hubNS)); err != nil {
			return err
		}
		if len(pods.Items) > 0 {
			return fmt.Errorf("pods left: %v", podStates(pods.Items))
		}
		return nil
	})
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
