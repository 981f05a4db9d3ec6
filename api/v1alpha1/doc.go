// Package v1alpha1 holds the infra.cloudspace.dev/v1alpha1 API: the kinds a platform team
// offers its developers (GenericDaemon, Workspace, VirtualMachine).
//
// +kubebuilder:object:generate=true
// +groupName=infra.cloudspace.dev
// +groupGoName=Infra
package v1alpha1
