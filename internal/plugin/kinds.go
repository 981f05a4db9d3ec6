package plugin

import (
	"context"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"

	"github.com/cloudspace-dev/cloudspace-operator/internal/inspect"
)

const (
	// Category groups the operator's kinds: `kubectl get cloudspace` lists them all.
	Category = "cloudspace"
	// PartOfLabel on a CRD says the operator serves it: the way a chart kind whose CRD is not
	// in Category is found.
	PartOfLabel = "app.kubernetes.io/part-of=cloudspace-operator"
)

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// Kind is a kind the operator serves, with how many of its resources are ready.
type Kind struct {
	Kind       string   `json:"kind"`
	Group      string   `json:"group"`
	Version    string   `json:"version"`
	Resource   string   `json:"resource"`
	ShortNames []string `json:"shortNames,omitempty"`
	Total      int      `json:"total"`
	Ready      int      `json:"ready"`
	NotReady   int      `json:"notReady"`
	// Unknown counts resources with no Ready condition yet, or an Unknown one.
	Unknown int `json:"unknown"`
}

func newKindsCommand(g *globals) *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   "kinds",
		Short: "List the kinds the operator serves, with counts by readiness",
		Long: `List the kinds the operator serves, with how many resources of each are Ready, not ready, or
not reconciled yet. A kind is the operator's when it is in the "cloudspace" category (kubectl
get cloudspace) or its CRD carries the label ` + PartOfLabel + `.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runKinds(cmd.Context(), g, all)
		},
	}
	cmd.Flags().BoolVarP(&all, "all-namespaces", "A", false, "count resources in every namespace")
	return cmd
}

func runKinds(ctx context.Context, g *globals, all bool) error {
	dc, err := g.kube.ToDiscoveryClient()
	if err != nil {
		return withCode(ExitFailed, "loading the kubeconfig: %w", err)
	}
	// The disk cache may be hours old, or another cluster's that had the same address: which
	// kinds are served is the question, so ask the cluster.
	dc.Invalidate()
	dyn, err := g.dynamicClient()
	if err != nil {
		return err
	}
	kinds, err := servedKinds(ctx, dc, dyn)
	if err != nil {
		return err
	}
	ns := ""
	if !all {
		if ns, _, err = g.kube.ToRawKubeConfigLoader().Namespace(); err != nil {
			return withCode(ExitFailed, "reading the namespace: %w", err)
		}
	}
	for i := range kinds {
		if err := count(ctx, dyn, &kinds[i], ns); err != nil {
			return err
		}
	}
	return g.print(kinds, func(w *tabwriter.Writer) {
		row(w, "KIND", "GROUP", "VERSION", "SHORTNAMES", "TOTAL", "READY", "NOT READY", "UNKNOWN")
		for _, k := range kinds {
			row(w, k.Kind, k.Group, k.Version, strings.Join(k.ShortNames, ","), k.Total, k.Ready, k.NotReady, k.Unknown)
		}
	})
}

// servedKinds finds the operator's kinds in discovery (the Category) and among the CRDs (the
// PartOfLabel), sorted by group and kind.
func servedKinds(ctx context.Context, dc discovery.DiscoveryInterface, dyn dynamic.Interface) ([]Kind, error) {
	lists, err := discovery.ServerPreferredResources(dc)
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		return nil, withCode(ExitFailed, "reading the cluster's API resources: %w", err)
	}
	var kinds []Kind
	for _, list := range lists {
		gv, _ := schema.ParseGroupVersion(list.GroupVersion)
		for _, r := range list.APIResources {
			if slices.Contains(r.Categories, Category) && !strings.Contains(r.Name, "/") {
				kinds = addKind(kinds, Kind{Kind: r.Kind, Group: gv.Group, Version: gv.Version, Resource: r.Name, ShortNames: r.ShortNames})
			}
		}
	}
	crds, err := dyn.Resource(crdResource).List(ctx, metav1.ListOptions{LabelSelector: PartOfLabel})
	if err != nil && !apierrors.IsForbidden(err) {
		return nil, withCode(ExitFailed, "listing CRDs: %w", err)
	}
	if crds != nil {
		for _, crd := range crds.Items {
			if k, ok := crdKind(&crd); ok {
				kinds = addKind(kinds, k)
			}
		}
	}
	if len(kinds) == 0 {
		return nil, withCode(ExitNotInstalled, "the cluster serves none of the Cloudspace operator's kinds: are its CRDs installed (make install, or an OLM install)?")
	}
	slices.SortFunc(kinds, func(a, b Kind) int { return strings.Compare(a.Group+"/"+a.Kind, b.Group+"/"+b.Kind) })
	return kinds, nil
}

// crdKind is the kind a CRD serves in its storage version.
func crdKind(crd *unstructured.Unstructured) (Kind, bool) {
	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind")
	plural, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
	short, _, _ := unstructured.NestedStringSlice(crd.Object, "spec", "names", "shortNames")
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range versions {
		m, _ := v.(map[string]any)
		if storage, _ := m["storage"].(bool); storage {
			name, _ := m["name"].(string)
			return Kind{Kind: kind, Group: group, Version: name, Resource: plural, ShortNames: short}, true
		}
	}
	return Kind{}, false
}

func addKind(kinds []Kind, k Kind) []Kind {
	for _, have := range kinds {
		if have.Group == k.Group && have.Kind == k.Kind {
			return kinds
		}
	}
	return append(kinds, k)
}

// count lists k's resources in ns (every namespace when empty) and counts them by readiness.
func count(ctx context.Context, dyn dynamic.Interface, k *Kind, ns string) error {
	gvr := schema.GroupVersionResource{Group: k.Group, Version: k.Version, Resource: k.Resource}
	list, err := dyn.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return withCode(ExitFailed, "listing %s: %w", k.Resource, err)
	}
	for i := range list.Items {
		k.Total++
		switch inspect.Ready(&list.Items[i]).Status {
		case metav1.ConditionTrue:
			k.Ready++
		case metav1.ConditionFalse:
			k.NotReady++
		default:
			k.Unknown++
		}
	}
	return nil
}
