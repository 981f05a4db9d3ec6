package engine

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// store is the engine's view of a cache. The engine holds an object for every child it
// manages, so a child of a built-in kind (ConfigMap, Deployment, Pod…: the kinds in scheme) is
// cached as its typed struct, about half the memory of the same object held as nested maps.
// The engine still sees every object as unstructured. The API server serializes built-in kinds
// from those same structs, so a converted object has the fields one read from the API has, and
// decoding one cannot fail. Custom resources (nil scheme) stay unstructured: a typed decode that
// fails for one invalid object would fail the informer's whole list and stop the kind.
type store struct {
	cache  cache.Cache
	scheme *runtime.Scheme // the kinds cached typed; nil for none
}

// object is what the cache holds a kind as: its typed struct when the scheme knows the kind.
func (c store) object(gvk schema.GroupVersionKind) client.Object {
	return c.newOf(gvk, &unstructured.Unstructured{}).(client.Object)
}

// list is object's list kind.
func (c store) list(gvk schema.GroupVersionKind) client.ObjectList {
	return c.newOf(gvk.GroupVersion().WithKind(gvk.Kind+"List"), &unstructured.UnstructuredList{}).(client.ObjectList)
}

// newOf is a new typed object of gvk, or empty, of gvk, when the store caches it unstructured.
func (c store) newOf(gvk schema.GroupVersionKind, empty runtime.Object) runtime.Object {
	if o := c.typed(gvk); o != nil {
		return o
	}
	empty.GetObjectKind().SetGroupVersionKind(gvk)
	return empty
}

// typed is a new typed object of gvk; nil when the store caches that kind unstructured.
func (c store) typed(gvk schema.GroupVersionKind) runtime.Object {
	if c.scheme == nil {
		return nil
	}
	o, err := c.scheme.New(gvk)
	if err != nil {
		return nil
	}
	return o
}

// get reads one object; nil when the cache has none.
func (c store) get(ctx context.Context, gvk schema.GroupVersionKind, key client.ObjectKey) (*unstructured.Unstructured, error) {
	obj := c.object(gvk)
	if err := c.cache.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	return asUnstructured(obj, gvk)
}

// listOf lists the cached objects of a kind.
func (c store) listOf(ctx context.Context, gvk schema.GroupVersionKind, opts ...client.ListOption) ([]*unstructured.Unstructured, error) {
	list := c.list(gvk)
	if err := c.cache.List(ctx, list, opts...); err != nil {
		return nil, err
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil, err
	}
	out := make([]*unstructured.Unstructured, 0, len(items))
	for _, item := range items {
		u, err := asUnstructured(item, gvk)
		if err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, nil
}

// source is a watch of a kind's cached objects.
func (c store) source(gvk schema.GroupVersionKind, h handler.EventHandler) source.Source {
	return source.Kind[client.Object](c.cache, c.object(gvk), h)
}

// asStored is obj as the store hands it back once stored: for a kind cached typed, through its
// Go type. It is nil for a kind cached unstructured, or an object its type cannot hold.
func (c store) asStored(obj *unstructured.Unstructured) *unstructured.Unstructured {
	gvk := obj.GroupVersionKind()
	typed := c.typed(gvk)
	if typed == nil {
		return nil
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, typed); err != nil {
		return nil
	}
	u, err := asUnstructured(typed, gvk)
	if err != nil {
		return nil
	}
	return u
}

// asUnstructured converts a cached object; the cache hands out copies, so nothing is shared.
func asUnstructured(obj runtime.Object, gvk schema.GroupVersionKind) (*unstructured.Unstructured, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return u, nil
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("converting a cached %s: %w", gvk.Kind, err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvk)
	return u, nil
}
