package olm

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	operatorsv1 "github.com/operator-framework/api/pkg/operators/v1"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cloudspace-dev/cloudspace-operator/internal/engine"
	"github.com/cloudspace-dev/cloudspace-operator/internal/inspect"
	"github.com/cloudspace-dev/cloudspace-operator/internal/scorecard"
	"github.com/cloudspace-dev/cloudspace-operator/test/framework"
)

// waitFor polls check until it returns nil, failing the test with its last error after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, check func(context.Context) error) {
	t.Helper()
	framework.WaitFor(t, timeout, what, check)
}

// TestSubscriptionInstallsAndUpgrades is what a user does: subscribe to the operator's
// channel from a catalog, approve the install, use the operator, then approve the upgrade to
// the next version. The install reaches Succeeded with the CRDs, RBAC and webhooks in place;
// the installed manager, run with the CSV's command line, environment and service account,
// reconciles the alm-examples; the upgrade reaches Succeeded with those resources and their
// children intact and not written to.
func TestSubscriptionInstallsAndUpgrades(t *testing.T) {
	v1, v2 := csvName("0.1.0"), csvName("0.2.0")
	addr := serveCatalog(t,
		catalogBundle{dir: filepath.Join(framework.RepoRoot(), "bundle"), name: v1},
		catalogBundle{dir: bundleVersion(t, "0.2.0", v1), name: v2})
	subscribe(t, addr, v1)

	approveInstallPlan(t, v1)
	csv := waitSucceeded(t, v1)
	checkInstalled(t, csv)
	mgr := runInstalledManager(t, csv)
	examples := createExamples(t, mgr)
	before := versions(t, examples)

	approveInstallPlan(t, v2)
	csv2 := waitSucceeded(t, v2)
	waitFor(t, 2*time.Minute, "the replaced CSV to be deleted", func(ctx context.Context) error {
		err := k8sClient.Get(ctx, client.ObjectKey{Namespace: operatorNS, Name: v1}, &operatorsv1alpha1.ClusterServiceVersion{})
		if err == nil {
			return fmt.Errorf("%s is still there", v1)
		}
		return client.IgnoreNotFound(err)
	})
	checkInstalled(t, csv2)
	if err := mgr.Stop(time.Minute); err != nil {
		t.Errorf("the %s manager did not stop cleanly: %v", v1, err)
	}
	mgr2 := runInstalledManager(t, csv2)
	mgr2.waitReconciled(t, len(examples))
	unchangedFor(t, examples, before, engine.DefaultStatusInterval+time.Second)
	for _, ex := range examples {
		if err := k8sClient.Get(context.Background(), client.ObjectKeyFromObject(ex), ex); err != nil || !inspect.IsReady(ex) {
			t.Errorf("%s %s after the upgrade: %v %s", ex.GetKind(), ex.GetName(), err, inspect.Conditions(ex))
		}
	}
}

// subscribe creates the CatalogSource (by address: no registry pod), an OperatorGroup for
// every namespace, and a Subscription that starts at startingCSV and waits for approvals.
func subscribe(t *testing.T, addr, startingCSV string) {
	t.Helper()
	ctx := context.Background()
	objs := []client.Object{
		&operatorsv1alpha1.CatalogSource{
			ObjectMeta: metav1.ObjectMeta{Namespace: olmNS, Name: "cloudspace"},
			Spec:       operatorsv1alpha1.CatalogSourceSpec{SourceType: operatorsv1alpha1.SourceTypeGrpc, Address: addr, DisplayName: "Cloudspace"},
		},
		&operatorsv1.OperatorGroup{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNS, Name: "cloudspace"}},
		&operatorsv1alpha1.Subscription{
			ObjectMeta: metav1.ObjectMeta{Namespace: operatorNS, Name: packageName},
			Spec: &operatorsv1alpha1.SubscriptionSpec{
				CatalogSource: "cloudspace", CatalogSourceNamespace: olmNS, Package: packageName, Channel: channels(t).Default,
				StartingCSV: startingCSV, InstallPlanApproval: operatorsv1alpha1.ApprovalManual,
			},
		},
	}
	for _, o := range objs {
		if err := k8sClient.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
}

// approveInstallPlan approves the InstallPlan the Subscription asks approval for once it
// installs csv, as a user does in the console or with `kubectl patch` (OLM may replace a plan
// before asking: only the Subscription's current one counts).
func approveInstallPlan(t *testing.T, csv string) {
	t.Helper()
	plan := &operatorsv1alpha1.InstallPlan{}
	waitFor(t, 2*time.Minute, "the Subscription's InstallPlan for "+csv, func(ctx context.Context) error {
		sub := &operatorsv1alpha1.Subscription{}
		if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: operatorNS, Name: packageName}, sub); err != nil {
			return err
		}
		if sub.Status.InstallPlanRef == nil {
			return fmt.Errorf("no plan yet (state %q)", sub.Status.State)
		}
		if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: operatorNS, Name: sub.Status.InstallPlanRef.Name}, plan); err != nil {
			return err
		}
		if !slices.Contains(plan.Spec.ClusterServiceVersionNames, csv) || plan.Status.Phase != operatorsv1alpha1.InstallPlanPhaseRequiresApproval {
			return fmt.Errorf("plan %s installs %v, phase %s", plan.Name, plan.Spec.ClusterServiceVersionNames, plan.Status.Phase)
		}
		return nil
	})
	// No optimistic lock: OLM writes the plan meanwhile, and the patch sets nothing but approved.
	base := plan.DeepCopy()
	plan.Spec.Approved = true
	if err := k8sClient.Patch(context.Background(), plan, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
}

// waitSucceeded waits until the CSV is installed.
func waitSucceeded(t *testing.T, name string) *operatorsv1alpha1.ClusterServiceVersion {
	t.Helper()
	csv := &operatorsv1alpha1.ClusterServiceVersion{}
	start := time.Now()
	waitFor(t, 3*time.Minute, name+" to succeed", func(ctx context.Context) error {
		if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: operatorNS, Name: name}, csv); err != nil {
			return err
		}
		if csv.Status.Phase != operatorsv1alpha1.CSVPhaseSucceeded {
			return fmt.Errorf("phase %s: %s", csv.Status.Phase, csv.Status.Message)
		}
		return nil
	})
	t.Logf("%s: Succeeded %s after its InstallPlan was approved", name, time.Since(start).Round(100*time.Millisecond))
	return csv
}

// checkInstalled checks what OLM installed for csv: the CRDs it owns, established; the RBAC
// it asks for, bound to its service account; its webhooks; its Deployment, available.
func checkInstalled(t *testing.T, csv *operatorsv1alpha1.ClusterServiceVersion) {
	t.Helper()
	ctx := context.Background()
	for _, d := range csv.Spec.CustomResourceDefinitions.Owned {
		crd := &apiextv1.CustomResourceDefinition{}
		if err := k8sClient.Get(ctx, client.ObjectKey{Name: d.Name}, crd); err != nil || !established(crd) {
			t.Errorf("CRD %s: %v, established %v", d.Name, err, established(crd))
		}
	}
	owned := client.MatchingLabels{"olm.owner": csv.Name}
	var clusterRoles rbacv1.ClusterRoleList
	var roles rbacv1.RoleList
	var mutating admissionregistrationv1.MutatingWebhookConfigurationList
	var validating admissionregistrationv1.ValidatingWebhookConfigurationList
	for what, list := range map[string]client.ObjectList{"ClusterRoles": &clusterRoles, "Roles": &roles,
		"mutating webhooks": &mutating, "validating webhooks": &validating} {
		if err := k8sClient.List(ctx, list, owned); err != nil {
			t.Fatalf("listing %s: %v", what, err)
		}
	}
	if len(clusterRoles.Items) == 0 || len(roles.Items) == 0 || len(mutating.Items) != 1 || len(validating.Items) != 1 {
		t.Errorf("%s installed %d ClusterRoles, %d Roles, %d mutating and %d validating webhook configurations",
			csv.Name, len(clusterRoles.Items), len(roles.Items), len(mutating.Items), len(validating.Items))
	}
	dep := &appsv1.Deployment{}
	name := csv.Spec.InstallStrategy.StrategySpec.DeploymentSpecs[0].Name
	waitFor(t, time.Minute, "the operator's Deployment to be available", func(ctx context.Context) error {
		if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: operatorNS, Name: name}, dep); err != nil {
			return err
		}
		for _, c := range dep.Status.Conditions {
			if c.Type == appsv1.DeploymentAvailable && c.Status == "True" {
				return nil
			}
		}
		return fmt.Errorf("conditions %v", dep.Status.Conditions)
	})
}

func established(crd *apiextv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextv1.Established && c.Status == apiextv1.ConditionTrue {
			return true
		}
	}
	return false
}

// createExamples creates the CSV's alm-examples that need no admission webhook (OLM points
// the VirtualMachine webhooks at the operator's pod, which KWOK only fakes) and waits until
// the manager has made them Ready.
func createExamples(t *testing.T, mgr *installedManager) []*unstructured.Unstructured {
	t.Helper()
	examples, err := scorecard.Examples(mgr.csv, "olm")
	if err != nil {
		t.Fatal(err)
	}
	var out []*unstructured.Unstructured
	for _, ex := range examples {
		if ex.Object.GetKind() == "VirtualMachine" {
			continue
		}
		obj := ex.Object.DeepCopy()
		obj.SetNamespace(appsNS)
		if err := k8sClient.Create(context.Background(), obj); err != nil {
			t.Fatalf("creating %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
		out = append(out, obj)
	}
	for _, obj := range out {
		waitFor(t, 2*time.Minute, obj.GetKind()+" "+obj.GetName()+" to be Ready", func(ctx context.Context) error {
			if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
				return err
			}
			if !inspect.IsReady(obj) {
				return fmt.Errorf("%s (manager log: %s)", inspect.Conditions(obj), mgr.LogPath)
			}
			return nil
		})
	}
	return out
}

// unchangedFor checks, for d, that neither objs nor their children change from before: the
// longest the engine puts off a write is its status interval.
func unchangedFor(t *testing.T, objs []*unstructured.Unstructured, before map[string]string, d time.Duration) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		if changed := framework.ChangedVersion(before, versions(t, objs)); changed != "" {
			t.Fatalf("written during the upgrade: %s", changed)
		}
	}
}

// versions are the resourceVersions of objs and of their children (framework.Versions).
func versions(t *testing.T, objs []*unstructured.Unstructured) map[string]string {
	t.Helper()
	out, err := framework.Versions(context.Background(), k8sClient, objs)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
