package objcache

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

// Store is a cache read as unstructured objects, whatever it holds them as. The engine holds an
// object for every child it manages, so a child of a built-in kind (ConfigMap, Deployment,
// Pod…: the kinds in Scheme) is cached as its typed struct, about half the memory of the same
// object held as nested maps. Its readers still see every object as unstructured. The API
// server serializes built-in kinds from those same structs, so a converted object has the
// fields one read from the API has, and decoding one cannot fail. Custom resources (nil Scheme)
// stay unstructured: a typed decode that fails for one invalid object would fail the informer's
// whole list and stop the kind.
type Store struct {
	Cache  cache.Cache     // the cache read
	Scheme *runtime.Scheme // the kinds cached typed; nil for none
}

// Object is what the cache holds a kind as: its typed struct when the scheme knows the kind.
// Every request for the kind (a controller's For, an informer) is made with it: the cache keeps
// an informer per form asked for, so another form would hold the kind twice.
func (c Store) Object(gvk schema.GroupVersionKind) client.Object {
	return c.newOf(gvk, &unstructured.Unstructured{}).(client.Object)
}

// list is Object's list kind.
func (c Store) list(gvk schema.GroupVersionKind) client.ObjectList {
	return c.newOf(gvk.GroupVersion().WithKind(gvk.Kind+"List"), &unstructured.UnstructuredList{}).(client.ObjectList)
}

// newOf is a new typed object of gvk, or empty, of gvk, when the store caches it unstructured.
func (c Store) newOf(gvk schema.GroupVersionKind, empty runtime.Object) runtime.Object {
	if o := c.typed(gvk); o != nil {
		return o
	}
	empty.GetObjectKind().SetGroupVersionKind(gvk)
	return empty
}

// typed is a new typed object of gvk; nil when the store caches that kind unstructured.
func (c Store) typed(gvk schema.GroupVersionKind) runtime.Object {
	if c.Scheme == nil {
		return nil
	}
	o, err := c.Scheme.New(gvk)
	if err != nil {
		return nil
	}
	return o
}

// Get reads one object; nil when the cache has none.
func (c Store) Get(ctx context.Context, gvk schema.GroupVersionKind, key client.ObjectKey) (*unstructured.Unstructured, error) {
	obj := c.Object(gvk)
	if err := c.Cache.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	return asUnstructured(obj, gvk)
}

// List lists the cached objects of a kind.
func (c Store) List(ctx context.Context, gvk schema.GroupVersionKind, opts ...client.ListOption) ([]*unstructured.Unstructured, error) {
	list := c.list(gvk)
	if err := c.Cache.List(ctx, list, opts...); err != nil {
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

// Source is a watch of a kind's cached objects.
func (c Store) Source(gvk schema.GroupVersionKind, h handler.EventHandler) source.Source {
	return source.Kind[client.Object](c.Cache, c.Object(gvk), h)
}

// AsStored is obj as the store hands it back once stored: for a kind cached typed, through its
// Go type, which drops what the type omits when empty and every field it does not know. It is
// nil for a kind cached unstructured, or an object its type cannot hold.
func (c Store) AsStored(obj *unstructured.Unstructured) *unstructured.Unstructured {
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
