{{/* Labels that select the IDE pod. managed-by puts the pod in the operator's label-selected
cache, so that its node and address reach the workspace's status. */}}
{{- define "workspace.selectorLabels" -}}
app.kubernetes.io/name: workspace
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "workspace.podLabels" -}}
{{ include "workspace.selectorLabels" . }}
app.kubernetes.io/managed-by: cloudspace-operator
infra.cloudspace.dev/owner: {{ .Values.owner | quote }}
{{- end }}

{{- define "workspace.home" -}}{{ .Release.Name }}-home{{- end }}

{{- define "workspace.accessSecret" -}}{{ .Release.Name }}-access{{- end }}
