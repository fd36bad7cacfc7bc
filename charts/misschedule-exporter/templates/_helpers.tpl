{{- define "misschedule-exporter.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "misschedule-exporter.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "misschedule-exporter.selectorLabels" -}}
app.kubernetes.io/name: {{ include "misschedule-exporter.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "misschedule-exporter.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "misschedule-exporter.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "misschedule-exporter.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "misschedule-exporter.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- /* Labels on every object: the standard ones plus the user's commonLabels. */ -}}
{{- define "misschedule-exporter.commonLabels" -}}
{{ include "misschedule-exporter.labels" . }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- /* registry/repository@digest (or :tag); global.imageRegistry wins, as in prometheus-community charts. */ -}}
{{- define "misschedule-exporter.image" -}}
{{- $registry := (.root.Values.global).imageRegistry | default .image.registry -}}
{{- $ref := .image.repository -}}
{{- if $registry }}{{ $ref = printf "%s/%s" $registry $ref }}{{ end -}}
{{- if .image.digest -}}
{{ $ref }}@{{ .image.digest }}
{{- else -}}
{{ $ref }}:{{ .image.tag | default .root.Chart.AppVersion }}
{{- end -}}
{{- end }}

{{- define "misschedule-exporter.scheme" -}}
{{ ternary "https" "http" (ne .Values.web.tlsSecretName "") }}
{{- end }}

{{- /*
The job label Prometheus gives the exporter's series through the chart's ServiceMonitor: the
value of the Service's label named by serviceMonitor.jobLabel, or the Service's name when it
has no such label (prometheus-operator's rule). The chart's rules and dashboard select it.
*/ -}}
{{- define "misschedule-exporter.job" -}}
{{- $labels := include "misschedule-exporter.commonLabels" . | fromYaml -}}
{{- get $labels .Values.serviceMonitor.jobLabel | default (include "misschedule-exporter.fullname" .) -}}
{{- end }}

{{- /* The namespace of every namespaced object: namespaceOverride, as an umbrella chart sets it, else the release's. */ -}}
{{- define "misschedule-exporter.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride -}}
{{- end }}

{{- /*
imagePullSecrets: global.imagePullSecrets (an umbrella chart's) then the chart's own, each
written as a name or as {name: ...}, as the kube-state-metrics chart accepts them; once each.
*/ -}}
{{- define "misschedule-exporter.imagePullSecrets" -}}
{{- $names := list }}
{{- range concat ((.Values.global).imagePullSecrets | default list) (.Values.imagePullSecrets | default list) }}
{{- $name := . }}
{{- if kindIs "map" . }}{{ $name = get . "name" }}{{ end }}
{{- if and $name (not (has $name $names)) }}{{ $names = append $names $name }}{{ end }}
{{- end }}
{{- range $names }}
- name: {{ . }}
{{- end }}
{{- end }}

{{- /* `release: <release>` when releaseLabel is set: kube-prometheus-stack's default selector of ServiceMonitors and PrometheusRules. */ -}}
{{- define "misschedule-exporter.releaseLabel" -}}
{{- if .Values.releaseLabel }}
release: {{ .Release.Name }}
{{- end }}
{{- end }}
