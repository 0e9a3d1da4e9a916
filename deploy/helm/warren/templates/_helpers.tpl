{{/* Labels every object of the release carries. */}}
{{- define "warren.labels" -}}
app.kubernetes.io/part-of: warren
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The image of the control plane, the node agents and the agent's init container. */}}
{{- define "warren.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag }}
{{- end -}}

{{/* Cluster-wide objects are named after the namespace, so that a second release in another
namespace (a test beside the shared one) does not take them over. */}}
{{- define "warren.clusterRole" -}}
{{- if eq .Release.Namespace "warren" -}}warren-control-plane{{- else -}}warren-control-plane-{{ .Release.Namespace }}{{- end -}}
{{- end -}}

{{/* Whether the control plane has a PostgreSQL: a URL, the bundled one, or a Secret made by
hand. */}}
{{- define "warren.sharedStore" -}}
{{- if or .Values.store.url .Values.postgresql.enabled .Values.store.existingSecret -}}true{{- end -}}
{{- end -}}

{{/* A value kept across upgrades: the named key of an existing Secret, else 64 new
hexadecimal digits (helm template, a first install). */}}
{{- define "warren.keptHex" -}}
{{- $s := lookup "v1" "Secret" .ns .name -}}
{{- if and $s $s.data (index $s.data .key) -}}
{{ index $s.data .key | b64dec }}
{{- else -}}
{{ randAlphaNum 64 | sha256sum }}
{{- end -}}
{{- end -}}
