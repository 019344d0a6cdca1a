{{/* Names: the release's objects are "<release>-gpu-pool-portal" unless overridden. */}}
{{- define "portal.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "portal.fullname" -}}
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

{{- define "portal.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "portal.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name: required when serviceAccount.create is false (the account the portal runs as)" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "portal.selectorLabels" -}}
app.kubernetes.io/name: {{ include "portal.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "portal.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "portal.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: gpu-pool-portal
{{- end -}}

{{/* Labels of one component; call with (dict "root" $ "component" "web"). */}}
{{- define "portal.componentLabels" -}}
{{ include "portal.labels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* The helm test pod's labels: the release's, but not the portal pods' selector. */}}
{{- define "portal.testLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: gpu-pool-portal
app.kubernetes.io/component: helm-test
{{- end -}}

{{- define "portal.componentSelector" -}}
{{ include "portal.selectorLabels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "portal.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* A pod template's labels: its component's, then podLabels (never the chart's own). */}}
{{- define "portal.podLabels" -}}
{{ include "portal.componentLabels" . }}
{{- range $key, $value := .root.Values.podLabels }}
{{- if or (hasPrefix "app.kubernetes.io/" $key) (hasPrefix "helm.sh/" $key) }}
{{- fail (printf "podLabels.%s: the chart sets app.kubernetes.io/* and helm.sh/* labels itself" $key) }}
{{- end }}
{{ $key }}: {{ $value | quote }}
{{- end }}
{{- end -}}


{{/* The non-secret settings, shared by the ConfigMap and the migration hook's copy. */}}
{{- define "portal.configData" -}}
{{- $c := .Values.config -}}
DJANGO_DEBUG: "false"
DJANGO_CSRF_TRUSTED_ORIGINS: {{ include "portal.csrfTrustedOrigins" . | quote }}
DJANGO_BEHIND_TLS_PROXY: {{ $c.behindTlsProxy | toString | quote }}
DJANGO_SECURE_SSL_REDIRECT: {{ $c.secureSslRedirect | toString | quote }}
LOG_FORMAT: {{ $c.logFormat | quote }}
LOG_LEVEL: {{ $c.logLevel | quote }}
TIME_ZONE: {{ $c.timeZone | quote }}
{{- with .Values.clusters.entries }}
{{- /* The clusters are described by the file: the variables would describe the first twice. */}}
{{- range $name := list "clusterName" "prometheusUrl" "prometheusClusterLabel" "prometheusClusterValue" }}
{{- if index $c $name }}
{{- fail (printf "config.%s: the clusters are described by clusters.entries; give it as the first entry's field instead" $name) }}
{{- end }}
{{- end }}
CLUSTERS_FILE: {{ include "portal.clustersFilePath" $ | quote }}
DCGM_NODE_LABEL: {{ $c.dcgmNodeLabel | quote }}
{{- if not (index . 0).pool_label_key }}
POOL_LABEL_KEY: {{ $c.poolLabelKey | quote }}
{{- end }}
{{- else }}
KUBE_IN_CLUSTER: "true"
PROMETHEUS_URL: {{ $c.prometheusUrl | quote }}
DCGM_NODE_LABEL: {{ $c.dcgmNodeLabel | quote }}
POOL_LABEL_KEY: {{ $c.poolLabelKey | quote }}
{{- with $c.clusterName }}
CLUSTER_NAME: {{ . | quote }}
{{- end }}
{{- with $c.prometheusClusterLabel }}
PROMETHEUS_CLUSTER_LABEL: {{ . | quote }}
{{- end }}
{{- with $c.prometheusClusterValue }}
PROMETHEUS_CLUSTER_VALUE: {{ . | quote }}
{{- end }}
{{- end }}
DRILL_NAMESPACE: {{ .Release.Namespace | quote }}
READYZ_REQUIRED: {{ join "," $c.readyzRequired | quote }}
LOCAL_LOGIN_ENABLED: {{ $c.localLoginEnabled | toString | quote }}
{{- with .Values.oidc }}
{{- if .enabled }}
OIDC_RP_CLIENT_ID: {{ required "oidc.clientId: required when oidc.enabled is true" .clientId | quote }}
OIDC_OP_AUTHORIZATION_ENDPOINT: {{ required "oidc.authorizationEndpoint: required when oidc.enabled is true" .authorizationEndpoint | quote }}
OIDC_OP_TOKEN_ENDPOINT: {{ required "oidc.tokenEndpoint: required when oidc.enabled is true" .tokenEndpoint | quote }}
OIDC_OP_USER_ENDPOINT: {{ required "oidc.userEndpoint: required when oidc.enabled is true" .userEndpoint | quote }}
OIDC_OP_JWKS_ENDPOINT: {{ required "oidc.jwksEndpoint: required when oidc.enabled is true" .jwksEndpoint | quote }}
OIDC_RP_SIGN_ALGO: {{ .signAlgo | quote }}
OIDC_ROLE_MAP: {{ .roleMap | quote }}
OIDC_GROUPS_CLAIM: {{ .groupsClaim | quote }}
{{- end }}
{{- end }}
{{- end -}}

{{- define "portal.ingressHosts" -}}
{{- $hosts := list -}}
{{- if .Values.ingress.enabled -}}
{{- range .Values.ingress.hosts -}}{{- $hosts = append $hosts .host -}}{{- end -}}
{{- end -}}
{{- join "," (uniq (concat .Values.config.allowedHosts $hosts)) -}}
{{- end -}}

{{/* The Service's in-cluster name: the helm test and in-cluster clients call it. */}}
{{- define "portal.serviceHost" -}}
{{- printf "%s.%s.svc" (include "portal.fullname" .) .Release.Namespace -}}
{{- end -}}

{{- define "portal.csrfTrustedOrigins" -}}
{{- $origins := list -}}
{{- if .Values.ingress.enabled -}}
{{- range .Values.ingress.hosts -}}{{- $origins = append $origins (printf "https://%s" .host) -}}{{- end -}}
{{- end -}}
{{- join "," (uniq (concat .Values.config.csrfTrustedOrigins $origins)) -}}
{{- end -}}

{{/*
The environment of every portal container: the ConfigMap, then each secret by reference.
Call with (dict "root" $ "configMap" "<name>"), adding "metrics" "dir" for a process group
that counts metrics (the web), "metrics" "port" for one that also serves them itself, 
"kubernetes" false for a pod that mounts no token (the web), and "heartbeat" true for a
process whose liveness is its heartbeat file (worker, beat, watcher).
*/}}
{{- define "portal.env" -}}
{{- $root := .root -}}
{{- $s := $root.Values.secrets -}}
envFrom:
  - configMapRef:
      name: {{ .configMap }}
env:
  # Kubelet probes and Prometheus scrapes address the pod by its IP: Django must accept
  # that Host header. $(POD_IP) is expanded by the kubelet.
  - name: POD_IP
    valueFrom:
      fieldRef:
        fieldPath: status.podIP
  - name: DJANGO_ALLOWED_HOSTS
    value: {{ printf "%s,%s,$(POD_IP)" (include "portal.ingressHosts" $root) (include "portal.serviceHost" $root) | trimPrefix "," | quote }}
  {{- if and (hasKey . "kubernetes") (not .kubernetes) }}
  {{- if $root.Values.clusters.entries }}
  # No token and no kubeconfig is mounted in this pod: the process calls no API server,
  # in any cluster, and does not look for the kubeconfigs the clusters file names.
  - name: KUBE_API_ACCESS
    value: "false"
  {{- else }}
  # No token is mounted in this pod: the process has no cluster (the ConfigMap's
  # KUBE_IN_CLUSTER is for the worker and the watcher).
  - name: KUBE_IN_CLUSTER
    value: "false"
  {{- end }}
  {{- end }}
  {{- include "portal.secretEnv" (dict "name" "DJANGO_SECRET_KEY" "ref" $s.djangoSecretKey "path" "secrets.djangoSecretKey") | nindent 2 }}
  {{- include "portal.secretEnv" (dict "name" "DATABASE_URL" "ref" $s.databaseUrl "path" "secrets.databaseUrl") | nindent 2 }}
  {{- include "portal.secretEnv" (dict "name" "CELERY_BROKER_URL" "ref" $s.celeryBrokerUrl "path" "secrets.celeryBrokerUrl") | nindent 2 }}
  {{- include "portal.secretEnv" (dict "name" "CACHE_URL" "ref" $s.cacheUrl "path" "secrets.cacheUrl") | nindent 2 }}
  {{- if $root.Values.metrics.enabled }}
  {{- include "portal.secretEnv" (dict "name" "METRICS_TOKEN" "ref" $s.metricsToken "path" "secrets.metricsToken") | nindent 2 }}
  {{- end }}
  {{- if .metrics }}
  # Each process's own figures, added up by /metrics (prometheus-client's multiprocess
  # mode): on the pod's /tmp emptyDir, emptied when the pod's main process starts.
  - name: PROMETHEUS_MULTIPROC_DIR
    value: /tmp/prometheus-multiproc
  {{- if and (eq .metrics "port") $root.Values.metrics.enabled }}
  # A worker or the watcher serves its own /metrics here (the web on its HTTP port).
  - name: METRICS_PORT
    value: {{ $root.Values.metrics.port | quote }}
  {{- end }}
  {{- end }}
  {{- if $root.Values.oidc.enabled }}
  {{- include "portal.secretEnv" (dict "name" "OIDC_RP_CLIENT_SECRET" "ref" $s.oidcClientSecret "path" "secrets.oidcClientSecret") | nindent 2 }}
  {{- end }}
  {{- if .heartbeat }}
  - name: HEARTBEAT_FILE
    value: /tmp/heartbeat
  {{- end }}
  {{- with $root.Values.extraEnv }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- end -}}

{{- define "portal.secretEnv" -}}
- name: {{ .name }}
  valueFrom:
    secretKeyRef:
      name: {{ required (printf "%s.name: the existing Secret that holds %s" .path .name) .ref.name }}
      key: {{ required (printf "%s.key: the key of %s in its Secret" .path .name) .ref.key }}
{{- end -}}

{{/* The restricted Pod Security level, for pods and for containers. */}}
{{- define "portal.podSecurityContext" -}}
{{- toYaml .Values.podSecurityContext -}}
{{- end -}}

{{- define "portal.containerSecurityContext" -}}
{{- toYaml .Values.securityContext -}}
{{- end -}}

{{/* Scheduling shared by every workload. */}}
{{- define "portal.scheduling" -}}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{- define "portal.tmpVolume" -}}
- name: tmp
  emptyDir:
    sizeLimit: {{ .Values.tmpSizeLimit }}
{{- end -}}

{{/*
The liveness of a process without HTTP (worker, beat, watcher): it renews /tmp/heartbeat
from its own main loop every HEARTBEAT_SECONDS (10); the probe fails once the file is older
than maxAge, and the kubelet restarts a hung process. Call with (dict "maxAge" N).
*/}}
{{- define "portal.heartbeatProbes" -}}
startupProbe:
  exec:
    command: [python, -m, pools.common.heartbeat, /tmp/heartbeat, {{ .maxAge | quote }}]
  periodSeconds: 10
  timeoutSeconds: 10
  failureThreshold: 30
livenessProbe:
  exec:
    command: [python, -m, pools.common.heartbeat, /tmp/heartbeat, {{ .maxAge | quote }}]
  periodSeconds: 30
  timeoutSeconds: 10
  failureThreshold: 2
{{- end -}}


{{/*
Several clusters (docs/clusters.md): clusters.entries is CLUSTERS_FILE's list, mounted from a
ConfigMap of its own. The further clusters' kubeconfigs (clusters.kubeconfigSecret) are
mounted only where an API server is called (the worker and the watchers); the Prometheus
credentials (clusters.prometheusSecret) wherever queries are sent, and where the start
checks them (every portal pod).
*/}}
{{- define "portal.clustersFilePath" -}}
/etc/portal/clusters/clusters.yaml
{{- end -}}

{{- define "portal.clustersFile" -}}
{{ toYaml (dict "clusters" .Values.clusters.entries) }}
{{- end -}}

{{/* Call with (dict "root" $ "configMap" "<name>" "kubernetes" <bool>). */}}
{{- define "portal.clustersVolumes" -}}
{{- $c := .root.Values.clusters -}}
{{- if $c.entries }}
- name: clusters
  configMap:
    name: {{ .configMap }}
{{- with $c.prometheusSecret }}
- name: cluster-prometheus
  secret:
    secretName: {{ . }}
{{- end }}
{{- if and .kubernetes $c.kubeconfigSecret }}
- name: cluster-kubeconfigs
  secret:
    secretName: {{ $c.kubeconfigSecret }}
{{- end }}
{{- end }}
{{- end -}}

{{- define "portal.clustersVolumeMounts" -}}
{{- $c := .root.Values.clusters -}}
{{- if $c.entries }}
- name: clusters
  mountPath: /etc/portal/clusters
  readOnly: true
{{- if $c.prometheusSecret }}
- name: cluster-prometheus
  mountPath: /etc/portal/prometheus
  readOnly: true
{{- end }}
{{- if and .kubernetes $c.kubeconfigSecret }}
- name: cluster-kubeconfigs
  mountPath: /etc/portal/kubeconfigs
  readOnly: true
{{- end }}
{{- end }}
{{- end -}}

{{/* Rolls the pods when a setting changes: the ConfigMap's, and the clusters file's. */}}
{{- define "portal.configChecksum" -}}
{{- if .Values.clusters.entries -}}
{{- print (include "portal.configData" .) (include "portal.clustersFile" .) | sha256sum -}}
{{- else -}}
{{- include "portal.configData" . | sha256sum -}}
{{- end -}}
{{- end -}}
