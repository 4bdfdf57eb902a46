{{/* Names and labels shared by every object. */}}
{{- define "warmroute.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "warmroute.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "warmroute.selector" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The Secret holding the Redis URL: the user's own, or the one this chart creates from redis.url. */}}
{{- define "warmroute.redisSecretName" -}}
{{- if .Values.redis.existingSecret -}}
{{- .Values.redis.existingSecret -}}
{{- else -}}
{{- printf "%s-redis" (include "warmroute.fullname" .) -}}
{{- end -}}
{{- end -}}

{{/* The Secret holding the admin token and the session-tag secret: the user's own, or the chart's. */}}
{{- define "warmroute.secretsName" -}}
{{- if .Values.secrets.existingSecret -}}
{{- .Values.secrets.existingSecret -}}
{{- else -}}
{{- printf "%s-secrets" (include "warmroute.fullname" .) -}}
{{- end -}}
{{- end -}}

{{/*
The gateway's config file. Only what is not secret: the Redis URL comes from a Secret through
WARMROUTE_REDIS (the environment overrides the file), and a replica apiKey has no place here.
*/}}
{{- define "warmroute.config" -}}
{{- range $i, $u := .Values.upstreams.static }}
{{- if $u.apiKey }}
{{- fail (printf "upstreams.static[%d].apiKey would be written to a ConfigMap: put the whole config file in a Secret and name it in configSecret" $i) }}
{{- end }}
{{- end }}
{{- range $k := list "listen" "admin" "upstreams" }}
{{- if hasKey $.Values.config $k }}
{{- fail (printf "config.%s is set by the chart (service.port, adminService.port, upstreams)" $k) }}
{{- end }}
{{- end }}
{{- if and .Values.config.redis (hasKey .Values.config.redis "url") }}
{{- fail "config.redis.url would be written to a ConfigMap: set redis.existingSecret (or redis.url, kept in a Secret)" }}
{{- end -}}
listen:
  host: 0.0.0.0
  port: {{ .Values.service.port }}
admin:
  host: 0.0.0.0
  port: {{ .Values.adminService.port }}
upstreams:
{{- if .Values.upstreams.dns.name }}
  - url: {{ printf "dns://%s:%v" .Values.upstreams.dns.name .Values.upstreams.dns.port | quote }}
{{- else if .Values.upstreams.static }}
  {{- toYaml .Values.upstreams.static | nindent 2 }}
{{- else }}
{{- fail "no upstreams: set upstreams.dns.name (the vLLM headless Service) or upstreams.static" }}
{{- end }}
{{- with .Values.config }}
{{ toYaml . }}
{{- end }}
{{- end -}}
