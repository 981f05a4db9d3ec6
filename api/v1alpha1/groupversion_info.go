// Package v1alpha1 holds the infra.cloudspace.dev/v1alpha1 API: the kinds a platform team
// offers its developers (GenericDaemon, Workspace, VirtualMachine).
//
// +kubebuilder:object:generate=true
// +groupName=infra.cloudspace.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of every kind in this package.
	GroupVersion = schema.GroupVersion{Group: "infra.cloudspace.dev", Version: "v1alpha1"}

	// SchemeBuilder registers this package's types with a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds this package's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
