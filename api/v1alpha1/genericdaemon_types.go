package v1alpha1

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// GenericDaemonSpec says what to run and on which nodes.
// +kubebuilder:validation:XValidation:rule="!has(self.label) || !has(self.nodeSelector) || !(self.label.split('=')[0] in self.nodeSelector)",message="label and nodeSelector must not name the same node label key",fieldPath=".label"
type GenericDaemonSpec struct {
	// Image is the container image run on every selected node, e.g. "registry.example/syslog:1.2".
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="!self.contains(' ')",message="must not contain spaces"
	// +required
	Image string `json:"image"`

	// Label restricts the daemon to nodes that carry this node label: either a key ("logs"),
	// which matches any value, or "key=value". Empty means every node.
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?(=([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?)?$`
	// +optional
	Label string `json:"label,omitempty"`

	// NodeSelector adds further node labels that a node must carry, as in a Pod spec.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// Tolerations let the daemon run on tainted nodes, as in a Pod spec.
	// +optional
	// +listType=atomic
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// Resources are the container's requests and limits.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`

	// Command replaces the image's entrypoint, as in a Pod spec; empty runs the entrypoint. An
	// image pre-puller runs a command that only waits, e.g. ["sleep", "infinity"].
	// +optional
	// +listType=atomic
	Command []string `json:"command,omitempty"`

	// Args are passed to the command, or to the image's entrypoint when there is none.
	// +optional
	// +listType=atomic
	Args []string `json:"args,omitempty"`

	// Env sets environment variables in the container.
	// +optional
	// +listType=map
	// +listMapKey=name
	Env []corev1.EnvVar `json:"env,omitempty"`

	// UpdateStrategy is the DaemonSet's update strategy; RollingUpdate by default.
	// +optional
	UpdateStrategy appsv1.DaemonSetUpdateStrategy `json:"updateStrategy,omitempty"`
}

// GenericDaemonStatus is what the operator observed of the daemon.
type GenericDaemonStatus struct {
	// ObservedGeneration is the generation last reconciled successfully.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Installed is the number of selected nodes running a ready daemon pod.
	// +optional
	Installed int32 `json:"installed"`

	// Desired is the number of nodes that should run the daemon.
	// +optional
	Desired int32 `json:"desired"`

	// Conditions are Ready, Progressing and Degraded.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Inventory lists the children the operator applied, so it can prune and tear them down.
	// +optional
	Inventory *Inventory `json:"inventory,omitempty"`
}

// GenericDaemon runs an image on every node that carries a given label.
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=gd;gds,categories=cloudspace
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.spec.image`
// +kubebuilder:printcolumn:name="Label",type=string,JSONPath=`.spec.label`
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=`.status.desired`
// +kubebuilder:printcolumn:name="Installed",type=integer,JSONPath=`.status.installed`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type GenericDaemon struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   GenericDaemonSpec   `json:"spec"`
	Status GenericDaemonStatus `json:"status,omitempty"`
}

// GenericDaemonList is a list of GenericDaemons.
// +kubebuilder:object:root=true
type GenericDaemonList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []GenericDaemon `json:"items"`
}

func init() {
	SchemeBuilder.Register(&GenericDaemon{}, &GenericDaemonList{})
}
