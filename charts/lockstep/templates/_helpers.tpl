{{/* The name of every object of the release: the release name, or
"lockstep" when the release is named after the chart. */}}
{{- define "lockstep.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Labels of the pods, and the Deployment's selector. */}}
{{- define "lockstep.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Labels of every object. */}}
{{- define "lockstep.labels" -}}
{{ include "lockstep.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* The agent's image: by digest when one is given. */}}
{{- define "lockstep.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag -}}
{{- if .Values.image.digest -}}
{{- if not (hasPrefix "sha256:" .Values.image.digest) -}}
{{- fail (printf "image.digest: %q is not a digest (want sha256:<hex>)" .Values.image.digest) -}}
{{- end -}}
{{- printf "%s:%s@%s" .Values.image.repository $tag .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository $tag -}}
{{- end -}}
{{- end -}}

{{/* The Git credentials Secret's name, "" for none. */}}
{{- define "lockstep.gitSecret" -}}
{{- if .Values.git.secret.create -}}
{{- default (printf "%s-git" (include "lockstep.fullname" .)) .Values.git.secret.name -}}
{{- else -}}
{{- .Values.git.secret.name -}}
{{- end -}}
{{- end -}}

{{/* The trusted root ConfigMap's name, "" for none. */}}
{{- define "lockstep.trustedRoot" -}}
{{- if and .Values.trustedRoot.json .Values.trustedRoot.configMapName -}}
{{- fail "trustedRoot: set json or configMapName, not both" -}}
{{- else if .Values.trustedRoot.json -}}
{{- printf "%s-sigstore-trusted-root" (include "lockstep.fullname" .) -}}
{{- else -}}
{{- .Values.trustedRoot.configMapName -}}
{{- end -}}
{{- end -}}
