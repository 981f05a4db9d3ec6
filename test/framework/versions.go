package framework

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cloudspace-dev/cloudspace-operator/internal/inspect"
)

// Versions are the resourceVersions of objs (served resources, read again) and of the children
// their inventories list, by kind and name: any write to one of them changes it. It fails when
// the resources have no children, which would make a comparison of them prove nothing.
func Versions(ctx context.Context, c client.Client, objs []*unstructured.Unstructured) (map[string]string, error) {
	out := map[string]string{}
	for _, obj := range objs {
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return nil, err
		}
		out[obj.GetKind()+" "+obj.GetName()] = obj.GetResourceVersion()
		children, err := inspect.Inventory(obj)
		if err != nil {
			return nil, err
		}
		for _, ch := range children {
			child := &unstructured.Unstructured{}
			child.SetGroupVersionKind(ch.GVK)
			if err := c.Get(ctx, client.ObjectKey{Namespace: ch.Namespace, Name: ch.Name}, child); err != nil {
				return nil, err
			}
			out[ch.GVK.Kind+" "+ch.Name] = child.GetResourceVersion()
		}
	}
	if len(out) <= len(objs) {
		return nil, fmt.Errorf("the resources have no children: %v", out)
	}
	return out, nil
}

// ChangedVersion names the first object whose resourceVersion differs between before and
// after, or is empty when none does.
func ChangedVersion(before, after map[string]string) string {
	for key, v := range before {
		if after[key] != v {
			return fmt.Sprintf("%s: resourceVersion %s, then %s", key, v, after[key])
		}
	}
	return ""
}
