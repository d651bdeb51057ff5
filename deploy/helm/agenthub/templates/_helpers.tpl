{{/* Chart name, release-qualified names and labels. */}}
{{- define "agenthub.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "agenthub.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Name of one service's objects: <fullname>-<service>. Call with (dict "root" $ "name" $name). */}}
{{- define "agenthub.componentName" -}}
{{- printf "%s-%s" (include "agenthub.fullname" .root) .name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "agenthub.selectorLabels" -}}
app.kubernetes.io/name: {{ include "agenthub.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "agenthub.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "agenthub.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: agenthub
{{- end -}}

{{- define "agenthub.secretName" -}}
{{- default (printf "%s-env" (include "agenthub.fullname" .)) .Values.secret.existingSecret -}}
{{- end -}}

{{- define "agenthub.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "agenthub.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "agenthub.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
