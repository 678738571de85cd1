{{/* Names and labels. */}}

{{- define "leash.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The release's full name: the release name alone when it contains the chart's. */}}
{{- define "leash.fullname" -}}
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

{{- define "leash.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "leash.selectorLabels" -}}
app.kubernetes.io/name: {{ include "leash.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "leash.labels" -}}
helm.sh/chart: {{ include "leash.chart" . }}
{{ include "leash.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: leash
{{- end }}

{{/* The `helm test` pod's labels: outside the Deployment's selector. */}}
{{- define "leash.testSelectorLabels" -}}
app.kubernetes.io/name: {{ include "leash.name" . }}-test
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: helm-test
{{- end }}

{{- define "leash.testLabels" -}}
helm.sh/chart: {{ include "leash.chart" . }}
{{ include "leash.testSelectorLabels" . }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: leash
{{- end }}

{{- define "leash.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "leash.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "leash.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag }}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository $tag }}
{{- end }}
{{- end }}

{{/* Where the container reads its files. */}}
{{- define "leash.configDir" -}}/etc/leash/config{{- end }}
{{- define "leash.secretDir" -}}/etc/leash/secret{{- end }}
{{- define "leash.descriptorsDir" -}}/etc/leash/ratelimit{{- end }}

{{/* Whether the chart makes the Secret: "true" or "". */}}
{{- define "leash.chartSecret" -}}
{{- $s := .Values.secret }}
{{- if and (not $s.existingSecret) (or $s.apiKeys $s.redis.password $s.redis.url) }}true{{ end }}
{{- end }}

{{/* The Secret the container reads a second config file from, "" when none. */}}
{{- define "leash.secretName" -}}
{{- if .Values.secret.existingSecret }}
{{- .Values.secret.existingSecret }}
{{- else if include "leash.chartSecret" . }}
{{- include "leash.fullname" . }}
{{- end }}
{{- end }}

{{- define "leash.secretKey" -}}
{{- if .Values.secret.existingSecret }}{{ .Values.secret.existingSecretKey }}{{ else }}secret.yaml{{ end }}
{{- end }}

{{/* The listeners of the mode: a dict with bind, http, grpc and admin. */}}
{{- define "leash.listeners" -}}
{{- if eq .Values.mode "sidecar" }}
{{- dict "bind" .Values.sidecar.bindAddress "http" (int .Values.sidecar.ports.http) "grpc" (int .Values.sidecar.ports.grpc) "admin" (int .Values.sidecar.ports.admin) | toYaml }}
{{- else }}
{{- dict "bind" "" "http" (int .Values.containerPorts.http) "grpc" (int .Values.containerPorts.grpc) "admin" (int .Values.containerPorts.admin) | toYaml }}
{{- end }}
{{- end }}

{{/* host:port, with brackets for an IPv6 host. */}}
{{- define "leash.addr" -}}
{{- $host := index . 0 }}
{{- if contains ":" $host }}{{ $host = printf "[%s]" $host }}{{ end }}
{{- printf "%s:%d" $host (int (index . 1)) }}
{{- end }}

{{/*
The Leash config file (leash.yaml): .Values.config with the listeners and the descriptor
folder set by the chart. Numbers pass through toYaml, so large ones stay integers.
*/}}
{{- define "leash.config" -}}
{{- $cfg := deepCopy (.Values.config | default dict) }}
{{- $l := include "leash.listeners" . | fromYaml }}
{{- $_ := set $cfg "http" (merge (dict "addr" (include "leash.addr" (list $l.bind $l.http))) (get $cfg "http" | default dict)) }}
{{- $_ := set $cfg "grpc" (merge (dict "addr" (include "leash.addr" (list $l.bind $l.grpc))) (get $cfg "grpc" | default dict)) }}
{{- $_ := set $cfg "admin" (merge (dict "addr" (include "leash.addr" (list "" $l.admin))) (get $cfg "admin" | default dict)) }}
{{- if .Values.descriptors }}
{{- $envoy := get $cfg "envoy" | default dict }}
{{- $paths := concat (get $envoy "config_paths" | default list) (list (include "leash.descriptorsDir" .)) }}
{{- $_ := set $envoy "config_paths" $paths }}
{{- $_ := set $cfg "envoy" $envoy }}
{{- end }}
{{- toYaml $cfg }}
{{- end }}

{{/*
The config file of the chart's Secret (secret.yaml): the Redis credentials and, with
secret.apiKeys, the whole accounts list with the plaintext keys added.
*/}}
{{- define "leash.secretConfig" -}}
{{- $out := dict }}
{{- $s := .Values.secret }}
{{- if $s.apiKeys }}
{{- $accounts := list }}
{{- range (.Values.config.accounts | default list) }}
{{- $a := deepCopy . }}
{{- with get $s.apiKeys $a.id }}
{{- $_ := set $a "api_keys" . }}
{{- end }}
{{- $accounts = append $accounts $a }}
{{- end }}
{{- $_ := set $out "accounts" $accounts }}
{{- end }}
{{- $redis := dict }}
{{- with $s.redis.password }}{{ $_ := set $redis "password" . }}{{ end }}
{{- with $s.redis.url }}{{ $_ := set $redis "url" . }}{{ end }}
{{- if $redis }}
{{- $_ := set $out "store" (dict "redis" $redis) }}
{{- end }}
{{- toYaml $out }}
{{- end }}

{{/* The container's arguments after the image's entrypoint (`leash serve`). */}}
{{- define "leash.args" -}}
- --config
- {{ include "leash.configDir" . }}/leash.yaml
{{- if include "leash.secretName" . }}
- --config
- {{ include "leash.secretDir" . }}/{{ include "leash.secretKey" . }}
{{- end }}
{{- end }}

{{/*
The Leash container, shared by the Deployment and the sidecar snippet of the notes.
*/}}
{{- define "leash.container" -}}
{{- $l := include "leash.listeners" . | fromYaml -}}
name: leash
image: {{ include "leash.image" . }}
imagePullPolicy: {{ .Values.image.pullPolicy }}
args:
{{- include "leash.args" . | nindent 2 }}
ports:
  - name: http
    containerPort: {{ int $l.http }}
    protocol: TCP
  - name: grpc
    containerPort: {{ int $l.grpc }}
    protocol: TCP
  - name: admin
    containerPort: {{ int $l.admin }}
    protocol: TCP
{{- $env := list }}
{{- with .Values.redisSecretRef.password.name }}
{{- $env = append $env (dict "name" "LEASH_STORE_REDIS_PASSWORD" "valueFrom" (dict "secretKeyRef" (dict "name" . "key" $.Values.redisSecretRef.password.key))) }}
{{- end }}
{{- with .Values.redisSecretRef.url.name }}
{{- $env = append $env (dict "name" "LEASH_STORE_REDIS_URL" "valueFrom" (dict "secretKeyRef" (dict "name" . "key" $.Values.redisSecretRef.url.key))) }}
{{- end }}
{{- if include "leash.onDisk" . }}
{{- $env = append $env (dict "name" "LEASH_STORE_DISK_PATH" "value" "/var/lib/leash") }}
{{- end }}
{{- $env = concat $env (.Values.extraEnv | default list) }}
{{- with $env }}
env:
  {{- toYaml . | nindent 2 }}
{{- end }}
livenessProbe:
  httpGet:
    path: /healthz
    port: admin
  {{- toYaml .Values.livenessProbe | nindent 2 }}
readinessProbe:
  httpGet:
    path: /readyz
    port: admin
  {{- toYaml .Values.readinessProbe | nindent 2 }}
{{- with .Values.resources }}
resources:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.securityContext }}
securityContext:
  {{- toYaml . | nindent 2 }}
{{- end }}
volumeMounts:
  - name: leash-config
    mountPath: {{ include "leash.configDir" . }}
    readOnly: true
{{- if include "leash.secretName" . }}
  - name: leash-secret
    mountPath: {{ include "leash.secretDir" . }}
    readOnly: true
{{- end }}
{{- if .Values.descriptors }}
  - name: leash-ratelimit
    mountPath: {{ include "leash.descriptorsDir" . }}
    readOnly: true
{{- end }}
{{- if include "leash.onDisk" . }}
  - name: leash-data
    mountPath: /var/lib/leash
{{- end }}
{{- with .Values.extraVolumeMounts }}
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* The volumes the container mounts (plus extraVolumes). */}}
{{- define "leash.volumes" -}}
- name: leash-config
  configMap:
    name: {{ include "leash.fullname" . }}
{{- with include "leash.secretName" . }}
- name: leash-secret
  secret:
    secretName: {{ . }}
    {{- /* Owner root: group-readable needs the pod's fsGroup, which the app's pod may lack. */}}
    {{- if and (eq $.Values.mode "service") (dig "fsGroup" nil ($.Values.podSecurityContext | default dict)) }}
    defaultMode: 0440
    {{- else }}
    defaultMode: 0444
    {{- end }}
{{- end }}
{{- if .Values.descriptors }}
- name: leash-ratelimit
  configMap:
    name: {{ include "leash.fullname" . }}-descriptors
{{- end }}
{{- with .Values.extraVolumes }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Seconds in a Go duration ("90s", "1h30m", "12.5s", "1500ms", 0), rounded up; -1 when
it is not one. */}}
{{- define "leash.seconds" -}}
{{- $d := toString . }}
{{- $num := "[0-9]+(\\.[0-9]+)?" }}
{{- if or (eq $d "0") (eq $d "<nil>") }}0
{{- else if not (regexMatch (printf "^(%s(ns|us|µs|ms|s|m|h))+$" $num) $d) }}-1
{{- else }}
{{- $unit := dict "h" 3600.0 "m" 60.0 "s" 1.0 "ms" 0.001 "us" 0.000001 "µs" 0.000001 "ns" 0.000000001 }}
{{- $total := 0.0 }}
{{- range regexFindAll (printf "%s(ns|us|µs|ms|s|m|h)" $num) $d -1 }}
{{- $n := regexFind (printf "^%s" $num) . }}
{{- $total = addf $total (mulf ($n | float64) (get $unit (trimPrefix $n .))) }}
{{- end }}
{{- ceil $total | int64 }}
{{- end }}
{{- end }}

{{/* config.store.backend, or Leash's default (disk) when the values leave it out. */}}
{{- define "leash.storeBackend" -}}
{{- dig "store" "backend" "disk" (.Values.config | default dict) }}
{{- end }}

{{/* "true" when the service runs on the disk store: a StatefulSet with a PersistentVolumeClaim. */}}
{{- define "leash.onDisk" -}}
{{- if and (eq .Values.mode "service") (eq (include "leash.storeBackend" .) "disk") }}true{{ end }}
{{- end }}

{{/*
Checks that need more than the schema; each fails the install with the reason.
*/}}
{{- define "leash.validate" -}}
{{- $v := .Values }}
{{- $store := include "leash.storeBackend" . }}
{{- if and (eq $v.mode "service") (has $store (list "memory" "disk")) }}
{{- if gt (int $v.replicaCount) 1 }}
{{- fail (printf "replicaCount is %d with config.store.backend %s: each replica would count on its own. Use config.store.backend: redis for more than one replica." (int $v.replicaCount) $store) }}
{{- end }}
{{- if $v.autoscaling.enabled }}
{{- fail (printf "autoscaling.enabled with config.store.backend %s: each replica would count on its own. Use config.store.backend: redis to scale out." $store) }}
{{- end }}
{{- end }}
{{- if and (eq $v.mode "sidecar") (eq $store "disk") }}
{{- fail "mode sidecar with config.store.backend disk: a sidecar has no volume of its own to keep. Use config.store.backend: memory (per-pod limits) or redis (shared)." }}
{{- end }}
{{- if and $v.autoscaling.enabled (gt (int $v.autoscaling.minReplicas) (int $v.autoscaling.maxReplicas)) }}
{{- fail "autoscaling.minReplicas is above autoscaling.maxReplicas" }}
{{- end }}
{{- range ($v.config.accounts | default list) }}
{{- if hasKey . "api_keys" }}
{{- fail (printf "config.accounts (%v): plaintext api_keys do not belong in the ConfigMap; put them in secret.apiKeys.%v (or api_key_sha256 digests in config.accounts)" .id .id) }}
{{- end }}
{{- end }}
{{- if dig "store" "redis" "password" "" ($v.config | default dict) }}
{{- fail "config.store.redis.password would be in the ConfigMap: use secret.redis.password or redisSecretRef.password" }}
{{- end }}
{{- $ids := list }}
{{- range ($v.config.accounts | default list) }}{{ $ids = append $ids .id }}{{ end }}
{{- range $id, $_ := $v.secret.apiKeys }}
{{- if not (has $id $ids) }}
{{- fail (printf "secret.apiKeys.%s: no account %q in config.accounts" $id $id) }}
{{- end }}
{{- end }}
{{- if and $v.secret.existingSecret (or $v.secret.apiKeys $v.secret.redis.password $v.secret.redis.url) }}
{{- fail "secret.existingSecret is set: put the keys and the Redis password in that Secret, and leave secret.apiKeys and secret.redis empty" }}
{{- end }}
{{- $redis := dig "store" "redis" dict ($v.config | default dict) }}
{{- if and (or $v.secret.redis.url $v.redisSecretRef.url.name) (or (get $redis "cluster_addrs") (get $redis "sentinel")) }}
{{- fail "a Redis URL (secret.redis.url or redisSecretRef.url) cannot be combined with config.store.redis.cluster_addrs or sentinel" }}
{{- end }}
{{- if and (eq $v.mode "service") (or (gt (int $v.replicaCount) 1) $v.autoscaling.enabled) (not (dig "accounts" list ($v.config | default dict))) (not $v.secret.existingSecret) }}
{{- fail "more than one replica and no config.accounts: each pod would make up its own dev API key. Configure config.accounts." }}
{{- end }}
{{- if and (eq $v.mode "sidecar") (not (dig "accounts" list ($v.config | default dict))) (not $v.secret.existingSecret) }}
{{- fail "mode sidecar needs accounts: without them each pod's Leash would make up its own dev API key, which the app cannot know. Configure config.accounts (api_key_sha256 digests from `leash keys new`, or plaintext keys in secret.apiKeys), or secret.existingSecret with the accounts." }}
{{- end }}
{{- $l := include "leash.listeners" . | fromYaml }}
{{- if or (eq $l.http $l.grpc) (eq $l.http $l.admin) (eq $l.grpc $l.admin) }}
{{- fail (printf "the http, grpc and admin ports must differ (%d, %d, %d)" (int $l.http) (int $l.grpc) (int $l.admin)) }}
{{- end }}
{{- $timeout := include "leash.seconds" (dig "shutdown" "timeout" "10s" ($v.config | default dict)) | int }}
{{- if lt $timeout 0 }}
{{- fail (printf "config.shutdown.timeout %q is not a Go duration (like 10s or 1m30s)" (toString (dig "shutdown" "timeout" "" ($v.config | default dict)))) }}
{{- end }}
{{- if and (eq $v.mode "service") (ge $timeout (int $v.terminationGracePeriodSeconds)) }}
{{- fail (printf "terminationGracePeriodSeconds (%d) must be above config.shutdown.timeout (%ds), or the kubelet kills Leash before it has drained" (int $v.terminationGracePeriodSeconds) $timeout) }}
{{- end }}
{{- end }}
