{{/* Labels that select the VM's pod: QEMU's launcher, or KubeVirt's virt-launcher, which
carries the template's labels. managed-by puts it in the operator's label-selected cache, so
that its node and address reach the VM's status. */}}
{{- define "vm.selectorLabels" -}}
app.kubernetes.io/name: virtualmachine
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "vm.podLabels" -}}
{{ include "vm.selectorLabels" . }}
app.kubernetes.io/managed-by: cloudspace-operator
{{- end }}

{{/* "true" when KubeVirt runs the VM: asked for, or auto and the cluster serves it. */}}
{{- define "vm.kubevirt" -}}
{{- if or (eq .Values.backend "kubevirt") (and (eq .Values.backend "auto") (.Capabilities.APIVersions.Has "kubevirt.io/v1/VirtualMachine")) -}}
true
{{- end -}}
{{- end }}

{{- define "vm.disk" -}}{{ .Release.Name }}-disk{{- end }}
{{- define "vm.rootDisk" -}}{{ .Release.Name }}-root{{- end }}
{{- define "vm.cloudInit" -}}{{ .Release.Name }}-cloudinit{{- end }}
