{{/* Chart name, overridable. */}}
{{- define "numapref.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Resource name prefix: <release>-numapref, or the release name when it already contains the chart name. */}}
{{- define "numapref.fullname" -}}
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

{{- define "numapref.selectorLabels" -}}
app.kubernetes.io/name: {{ include "numapref.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: agent
{{- end -}}

{{- define "numapref.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "numapref.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "numapref.serviceAccountName" -}}
{{- default (include "numapref.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{/*
The name every agent's serving certificate carries: the agent Service's DNS name. Clients
dial an agent's node IP (a DaemonSet on the host network has no per-pod name) and verify
this name, which the ConfigMap numapref-agent-ca publishes beside the CA.
*/}}
{{- define "numapref.agentServerName" -}}
{{- printf "%s-agent.%s.svc" (include "numapref.fullname" .) .Release.Namespace -}}
{{- end -}}

{{/* The Secret the agents mount: the serving certificate (tls.crt, tls.key, ca.crt). */}}
{{- define "numapref.tlsSecretName" -}}
{{- printf "%s-agent-tls" (include "numapref.fullname" .) -}}
{{- end -}}

{{/* The Secret with the CA's key, which the signer makes and alone reads (per-node
certificates); no release holds it. */}}
{{- define "numapref.caSecretName" -}}
{{- printf "%s-signer-ca" (include "numapref.fullname" .) -}}
{{- end -}}

{{/* With cert-manager: the Secret of cert-manager's CA, which its CA Issuer alone reads. */}}
{{- define "numapref.certManagerCASecretName" -}}
{{- printf "%s-cm-ca" (include "numapref.fullname" .) -}}
{{- end -}}

{{/* The signer's: the Deployment that keeps the agents' CA and signs their certificates. */}}
{{- define "numapref.signerName" -}}
{{- printf "%s-signer" (include "numapref.fullname" .) -}}
{{- end -}}

{{- define "numapref.signerSelectorLabels" -}}
app.kubernetes.io/name: {{ include "numapref.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: signer
{{- end -}}

{{- define "numapref.signerLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "numapref.signerSelectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* The identity Prometheus scrapes the agents with (metrics.podMonitor), and the Secret
the signer keeps its expiring token in. */}}
{{- define "numapref.scraperName" -}}
{{- printf "%s-metrics-scraper" (include "numapref.fullname" .) -}}
{{- end -}}

{{/* "true" when the chart makes the scraper's identity and the signer keeps its token. */}}
{{- define "numapref.scraperToken" -}}
{{- if and .Values.metrics.enabled .Values.metrics.podMonitor.enabled (not .Values.metrics.podMonitor.tokenSecret.name) -}}true{{- end -}}
{{- end -}}

{{/* "true" when the signer Deployment has work: per-node certificates (its CA, the
signing, the CA ConfigMap), cert-manager (publishing cert-manager's CA), or the scraper's
token. */}}
{{- define "numapref.signer" -}}
{{- if or (include "numapref.nodeCertificates" .) (and .Values.metrics.enabled .Values.certManager.enabled) (include "numapref.scraperToken" .) -}}true{{- end -}}
{{- end -}}

{{/* The summarizer's: the Deployment that alone writes NumaPreference status. */}}
{{- define "numapref.summarizerName" -}}
{{- printf "%s-summarizer" (include "numapref.fullname" .) -}}
{{- end -}}

{{- define "numapref.summarizerSelectorLabels" -}}
app.kubernetes.io/name: {{ include "numapref.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: summarizer
{{- end -}}

{{- define "numapref.summarizerLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "numapref.summarizerSelectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/*
"true" when every agent serves a certificate of its own node (tls.nodeCertificates): asked
for through the CSR API, signed by the signer with a CA it makes and alone holds. Only with metrics
served, without cert-manager, and on the host network (forkEvents), where the agent listens
on its node's address, which the certificate names.
*/}}
{{- define "numapref.nodeCertificates" -}}
{{- if and .Values.metrics.enabled .Values.tls.nodeCertificates (not .Values.certManager.enabled) .Values.forkEvents -}}true{{- end -}}
{{- end -}}
