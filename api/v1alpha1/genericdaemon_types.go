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

	// NodeSelector adds further node labels that a node must carry, as in a Pod spec. At most 16
	// labels, each key at most 317 characters and each value at most 63 (a node label's).
	// +kubebuilder:validation:MaxProperties=16
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 317 && size(self[k]) <= 63)",message="each key must be at most 317 characters and each value at most 63, as a node label's"
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// Tolerations let the daemon run on tainted nodes, as in a Pod spec. At most 16, each key at
	// most 317 characters, value at most 63, operator and effect at most 16.
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.all(t, (!has(t.key) || size(t.key) <= 317) && (!has(t.value) || size(t.value) <= 63) && (!has(t.operator) || size(t.operator) <= 16) && (!has(t.effect) || size(t.effect) <= 16))",message="each key must be at most 317 characters, each value at most 63, each operator and effect at most 16"
	// +optional
	// +listType=atomic
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// Resources are the container's requests and limits: at most 8 limits and 8 requests (each
	// resource name at most 317 characters, each quantity at most 64) and 4 claims (each name
	// and request at most 63 characters).
	// +kubebuilder:validation:XValidation:rule="!has(self.limits) || size(self.limits) <= 8",message="at most 8 limits"
	// +kubebuilder:validation:XValidation:rule="!has(self.limits) || self.limits.all(k, size(k) <= 317 && (type(self.limits[k]) == string ? size(self.limits[k]) : 0) <= 64)",message="each resource name of limits must be at most 317 characters and each quantity at most 64"
	// +kubebuilder:validation:XValidation:rule="!has(self.requests) || size(self.requests) <= 8",message="at most 8 requests"
	// +kubebuilder:validation:XValidation:rule="!has(self.requests) || self.requests.all(k, size(k) <= 317 && (type(self.requests[k]) == string ? size(self.requests[k]) : 0) <= 64)",message="each resource name of requests must be at most 317 characters and each quantity at most 64"
	// +kubebuilder:validation:XValidation:rule="!has(self.claims) || (size(self.claims) <= 4 && self.claims.all(c, size(c.name) <= 63 && (!has(c.request) || size(c.request) <= 63)))",message="at most 4 claims, each name and request at most 63 characters"
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`

	// Command replaces the image's entrypoint, as in a Pod spec; empty runs the entrypoint. An
	// image pre-puller runs a command that only waits, e.g. ["sleep", "infinity"]. At most 32
	// items, each at most 4096 characters and all together at most 4096.
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=4096
	// +kubebuilder:validation:XValidation:rule="self.map(a, size(a)).sum() <= 4096",message="all items together must be at most 4096 characters"
	// +optional
	// +listType=atomic
	Command []string `json:"command,omitempty"`

	// Args are passed to the command, or to the image's entrypoint when there is none. At most
	// 128 items, each at most 4096 characters and all together at most 8192 (8 KiB).
	// +kubebuilder:validation:MaxItems=128
	// +kubebuilder:validation:items:MaxLength=4096
	// +kubebuilder:validation:XValidation:rule="self.map(a, size(a)).sum() <= 8192",message="all items together must be at most 8192 characters (8 KiB)"
	// +optional
	// +listType=atomic
	Args []string `json:"args,omitempty"`

	// Env sets environment variables in the container: values, ConfigMap keys and field
	// references, never a Secret (secretKeyRef): a daemon may not read the namespace's Secrets for
	// its author. At most 64 variables, 8 KiB a value, 16 KiB in all (EnvVars).
	// +optional
	Env EnvVars `json:"env,omitempty"`

	// UpdateStrategy is the DaemonSet's update strategy; RollingUpdate by default. Its type,
	// maxUnavailable and maxSurge are each at most 16 characters.
	// +kubebuilder:validation:XValidation:rule="(!has(self.type) || size(self.type) <= 16) && (!has(self.rollingUpdate) || ((!has(self.rollingUpdate.maxUnavailable) || (type(self.rollingUpdate.maxUnavailable) == string ? size(self.rollingUpdate.maxUnavailable) : 0) <= 16) && (!has(self.rollingUpdate.maxSurge) || (type(self.rollingUpdate.maxSurge) == string ? size(self.rollingUpdate.maxSurge) : 0) <= 16)))",message="type, maxUnavailable and maxSurge must each be at most 16 characters"
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
//
// Its name is at most 63 characters: every child carries it as the value of the
// app.kubernetes.io/instance label (at most 63 characters), and the DaemonSet selects its pods
// by it. Checked at creation only, so a GenericDaemon stored before the rule can still be
// changed and deleted.
//
// Size: the largest spec the CRD admits is about 55 KiB of JSON (env 21 KiB: 16 KiB of text
// and the JSON around 64 variables; args 9 KiB; tolerations 7.5 KiB; resources 7 KiB;
// nodeSelector 6.5 KiB; command 4.5 KiB; image and label under 1 KiB), so that no tenant's
// object grows the operator's memory (each object is held several times) beyond that.
// TestLargestAdmittedSpecsStaySmall (test/integration) measures it.
// +kubebuilder:validation:XValidation:rule="oldSelf.hasValue() || size(self.metadata.name) <= 63",optionalOldSelf=true,message="metadata.name must be at most 63 characters: it is the value of the app.kubernetes.io/instance label of every child, which the API server refuses longer"
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
