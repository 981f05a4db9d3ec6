{{/* Labels that select the daemon's pods; stable for the life of the release. */}}
{{- define "genericdaemon.selectorLabels" -}}
app.kubernetes.io/name: genericdaemon
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The label key of .Values.label ("key" or "key=value"). */}}
{{- define "genericdaemon.labelKey" -}}
{{- regexReplaceAll "=.*$" .Values.label "" -}}
{{- end }}
