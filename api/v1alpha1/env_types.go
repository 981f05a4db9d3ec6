package v1alpha1

import corev1 "k8s.io/api/core/v1"

// EnvVars are the environment variables a kind's spec sets in the container it runs. They
// never reference a Secret (secretKeyRef): whoever may create the resource could otherwise put
// any Secret of the namespace, one they may not read themselves, where they can read it.
// Bounds (each object is held several times in the operator's memory): at most 64 variables;
// a name at most 128 characters, a value at most 8 KiB, and the names, values and references
// of all variables together at most 16 KiB; a valueFrom names exactly one source.
// +listType=map
// +listMapKey=name
// +kubebuilder:validation:MaxItems=64
// +kubebuilder:validation:XValidation:rule="self.all(e, size(e.name) <= 128)",message="each name must be at most 128 characters"
// +kubebuilder:validation:XValidation:rule="self.all(e, !has(e.value) || size(e.value) <= 8192)",message="each value must be at most 8192 characters (8 KiB): keep larger data in a ConfigMap"
// +kubebuilder:validation:XValidation:rule="self.all(e, !has(e.valueFrom) || [has(e.valueFrom.configMapKeyRef), has(e.valueFrom.secretKeyRef), has(e.valueFrom.fieldRef), has(e.valueFrom.resourceFieldRef), has(e.valueFrom.fileKeyRef)].exists_one(x, x))",message="each valueFrom must name exactly one source, as in a Pod"
// +kubebuilder:validation:XValidation:rule="self.map(e, size(e.name) + (has(e.value) ? size(e.value) : 0) + (!has(e.valueFrom) ? 0 : (has(e.valueFrom.configMapKeyRef) ? size(e.valueFrom.configMapKeyRef.key) + (has(e.valueFrom.configMapKeyRef.name) ? size(e.valueFrom.configMapKeyRef.name) : 0) : 0) + (has(e.valueFrom.secretKeyRef) ? size(e.valueFrom.secretKeyRef.key) + (has(e.valueFrom.secretKeyRef.name) ? size(e.valueFrom.secretKeyRef.name) : 0) : 0) + (has(e.valueFrom.fieldRef) ? size(e.valueFrom.fieldRef.fieldPath) + (has(e.valueFrom.fieldRef.apiVersion) ? size(e.valueFrom.fieldRef.apiVersion) : 0) : 0) + (has(e.valueFrom.resourceFieldRef) ? size(e.valueFrom.resourceFieldRef.resource) + (has(e.valueFrom.resourceFieldRef.containerName) ? size(e.valueFrom.resourceFieldRef.containerName) : 0) + (has(e.valueFrom.resourceFieldRef.divisor) ? (type(e.valueFrom.resourceFieldRef.divisor) == string ? size(e.valueFrom.resourceFieldRef.divisor) : 0) : 0) : 0) + (has(e.valueFrom.fileKeyRef) ? size(e.valueFrom.fileKeyRef.key) + size(e.valueFrom.fileKeyRef.path) + size(e.valueFrom.fileKeyRef.volumeName) : 0))).sum() <= 16384",message="the names, values and references of all variables together must be at most 16384 characters (16 KiB): keep larger data in a ConfigMap"
// +kubebuilder:validation:XValidation:rule="self.all(e, !has(e.valueFrom) || !has(e.valueFrom.secretKeyRef))",message="secretKeyRef is not allowed: the operator's workloads never read the namespace's Secrets for their author"
type EnvVars []corev1.EnvVar
