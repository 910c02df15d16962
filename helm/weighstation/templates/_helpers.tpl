{{/* Names */}}
{{- define "weighstation.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "weighstation.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "weighstation.quota.fullname" -}}{{ include "weighstation.fullname" . }}-quota{{- end -}}
{{/* The headless Service of the Envoy pods: its DNS name resolves to the ready replicas. */}}
{{- define "weighstation.envoy.peers" -}}
{{- printf "%s-peers.%s.svc.%s" (include "weighstation.envoy.fullname" .) .Release.Namespace .Values.clusterDomain -}}
{{- end -}}
{{/* Where policies reach the in-chart quota service (GatewayDefaults spec.quotaService.address). */}}
{{- define "weighstation.quota.address" -}}
{{- printf "%s.%s.svc.%s:%d" (include "weighstation.quota.fullname" .) .Release.Namespace .Values.clusterDomain (int .Values.quota.port) -}}
{{- end -}}
{{- define "weighstation.controlPlane.fullname" -}}{{ include "weighstation.fullname" . }}-control-plane{{- end -}}
{{- define "weighstation.envoy.fullname" -}}{{ include "weighstation.fullname" . }}-envoy{{- end -}}
{{- define "weighstation.policies.name" -}}
{{- .Values.policies.existingConfigMap | default (printf "%s-policies" (include "weighstation.fullname" .)) -}}
{{- end -}}

{{/* Labels; call with (dict "root" $ "component" "envoy") */}}
{{- define "weighstation.selectorLabels" -}}
app.kubernetes.io/name: {{ include "weighstation.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "weighstation.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "weighstation.selectorLabels" . }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/part-of: weighstation
{{- end -}}

{{/* image reference; call with (dict "image" .Values.x.image "default" tag) */}}
{{- define "weighstation.image" -}}
{{- if .image.digest -}}
{{- printf "%s@%s" .image.repository .image.digest -}}
{{- else -}}
{{- printf "%s:%s" .image.repository (.image.tag | default .default) -}}
{{- end -}}
{{- end -}}

{{/* Addresses the Envoy pods use to reach the control plane. */}}
{{- define "weighstation.controlPlane.host" -}}
{{- printf "%s.%s.svc.%s" (include "weighstation.controlPlane.fullname" .) .Release.Namespace .Values.clusterDomain -}}
{{- end -}}
{{- define "weighstation.controlPlane.xds" -}}
{{- printf "%s:%d" (include "weighstation.controlPlane.host" .) (int .Values.controlPlane.xdsPort) -}}
{{- end -}}
{{/* The control plane replicas' headless Service (they relay usage reports to each other). */}}
{{- define "weighstation.controlPlane.peers" -}}
{{- printf "%s-peers.%s.svc.%s" (include "weighstation.controlPlane.fullname" .) .Release.Namespace .Values.clusterDomain -}}
{{- end -}}
{{- define "weighstation.controlPlane.http" -}}
{{- printf "%s:%d" (include "weighstation.controlPlane.host" .) (int .Values.controlPlane.httpPort) -}}
{{- end -}}

{{/* The Envoy Service's DNS name: where clients in the cluster reach the gateway. */}}
{{- define "weighstation.envoy.host" -}}
{{- printf "%s.%s.svc.%s" (include "weighstation.envoy.fullname" .) .Release.Namespace .Values.clusterDomain -}}
{{- end -}}

{{/* Every NATS seed as host:port, comma-separated: the control plane makes them the endpoints of
one upstream cluster, and Envoy balances new connections across them. */}}
{{- define "weighstation.nats.upstream" -}}
{{- $seeds := list -}}
{{- range .Values.nats.servers -}}
{{- $seeds = append $seeds (trimPrefix "nats://" .) -}}
{{- end -}}
{{- join "," $seeds -}}
{{- end -}}

{{/* The gateway addresses the clients of a NATS listener are told in every INFO in place of the
servers' (connect_urls; the first is also host and port), comma-separated: the listener's
advertise values, or the Envoy Service's DNS name with the listener's port. Call with
(dict "root" $ "listener" .Values.nats) or (dict "root" $ "listener" .Values.tls.nats). */}}
{{- define "weighstation.nats.advertiseFor" -}}
{{- if .listener.advertise -}}
{{- join "," .listener.advertise -}}
{{- else -}}
{{- printf "%s:%d" (include "weighstation.envoy.host" .root) (int .listener.port) -}}
{{- end -}}
{{- end -}}
{{/* --nats-advertise: for the clients of the plaintext listener (nats.port). */}}
{{- define "weighstation.nats.advertise" -}}
{{- include "weighstation.nats.advertiseFor" (dict "root" . "listener" .Values.nats) -}}
{{- end -}}
{{/* --nats-tls-advertise: for the clients of the TLS-first listener (tls.nats.port). */}}
{{- define "weighstation.nats.tlsAdvertise" -}}
{{- include "weighstation.nats.advertiseFor" (dict "root" . "listener" .Values.tls.nats) -}}
{{- end -}}

{{/* The bootstrap listener (kafka.port) forwards to the first broker; with kafka.cluster, to
the brokers of kafka.cluster.bootstrap (comma-separated, spaces dropped). */}}
{{- define "weighstation.kafka.upstream" -}}
{{- if .Values.kafka.cluster.enabled -}}
{{- include "weighstation.kafka.clusterBootstrap" . | replace "+" "," -}}
{{- else -}}
{{- first .Values.kafka.brokers -}}
{{- end -}}
{{- end -}}

{{/* kafka.cluster.bootstrap as --kafka-cluster's bootstrap= takes it: HOST:PORT[+HOST:PORT...]. */}}
{{- define "weighstation.kafka.clusterBootstrap" -}}
{{- $out := list -}}
{{- range splitList "," .Values.kafka.cluster.bootstrap -}}
{{- with trim . -}}
{{- $out = append $out . -}}
{{- end -}}
{{- end -}}
{{- join "+" $out -}}
{{- end -}}

{{/* --kafka-cluster, as the control plane takes it: NAME=BROKERS,nodes=FIRST-LAST,listen=ADDRESS,
bootstrap=HOST:PORT[+HOST:PORT...],advertise=HOST:PORT and the listener options. The cluster
kind is named kafka; node FIRST listens on kafka.port+1 and is advertised at the advertised
host with that port, node n at that port + (n - FIRST) (stride 1). */}}
{{- define "weighstation.kafka.clusterFlag" -}}
{{- $c := .Values.kafka.cluster -}}
{{- $firstPort := add (int .Values.kafka.port) 1 -}}
{{- printf "kafka=0.0.0.0:%d,nodes=%d-%d,listen=0.0.0.0:%d,bootstrap=%s,advertise=%s:%d%s" $firstPort (int $c.nodeIds.first) (int $c.nodeIds.last) (int .Values.kafka.port) (include "weighstation.kafka.clusterBootstrap" .) (include "weighstation.kafka.advertisedHost" .) $firstPort (include "weighstation.kafka.listenerOptions" .) -}}
{{- end -}}

{{/* The host clients are told for every broker (Metadata, FindCoordinator responses). */}}
{{- define "weighstation.kafka.advertisedHost" -}}
{{- .Values.kafka.advertisedHost | default (include "weighstation.envoy.host" .) -}}
{{- end -}}

{{/* One gateway port per broker of kafka.brokers, in order: broker i (from 0) gets
kafka.port + 1 + i, named kafka-broker-<i> on the Envoy container and the Service (Envoy's
listener and cluster for it are kafka_broker_<i>). A JSON list of {name, port, upstream,
advertise}; read it with fromJsonArray (numbers come back as floats: use int). */}}
{{- define "weighstation.kafka.brokerPorts" -}}
{{- $out := list -}}
{{- $host := include "weighstation.kafka.advertisedHost" . -}}
{{- range $i, $b := .Values.kafka.brokers -}}
{{- $port := add (int $.Values.kafka.port) 1 $i -}}
{{- $out = append $out (dict "name" (printf "kafka-broker-%d" $i) "port" $port "upstream" $b "advertise" (printf "%s:%d" $host $port)) -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{/* With kafka.cluster: one gateway port per node id of kafka.cluster.nodeIds, node n at
kafka.port + 1 + (n - first), named kafka-node-<n> on the Envoy container and the Service (Envoy's
listener for it is kafka_kafka_node_<n>). A JSON list of {name, port, node}. */}}
{{- define "weighstation.kafka.nodePorts" -}}
{{- $out := list -}}
{{- $c := .Values.kafka.cluster -}}
{{- $first := int $c.nodeIds.first -}}
{{- range $n := untilStep $first (add (int $c.nodeIds.last) 1 | int) 1 -}}
{{- $out = append $out (dict "name" (printf "kafka-node-%d" $n) "port" (add (int $.Values.kafka.port) 1 (sub $n $first)) "node" $n) -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{/* The Kafka client ports besides the bootstrap port: one per broker of kafka.brokers, or one
per node id with kafka.cluster. A JSON list of {name, port}. */}}
{{- define "weighstation.kafka.clientPorts" -}}
{{- if .Values.kafka.cluster.enabled -}}
{{- include "weighstation.kafka.nodePorts" . -}}
{{- else -}}
{{- include "weighstation.kafka.brokerPorts" . -}}
{{- end -}}
{{- end -}}

{{/* The last Kafka gateway port: kafka.port + the number of broker (or node) ports. */}}
{{- define "weighstation.kafka.lastPort" -}}
{{- $c := .Values.kafka.cluster -}}
{{- if $c.enabled -}}
{{- add (int .Values.kafka.port) 1 (sub (int $c.nodeIds.last) (int $c.nodeIds.first)) -}}
{{- else -}}
{{- add (int .Values.kafka.port) (len .Values.kafka.brokers) -}}
{{- end -}}
{{- end -}}

{{/* The quota store's addresses, comma-separated: quota.redis.addresses, or its address. */}}
{{- define "weighstation.quota.redisAddresses" -}}
{{- $r := .Values.quota.redis -}}
{{- if $r.addresses }}{{ join "," $r.addresses }}{{ else }}{{ $r.address }}{{ end -}}
{{- end -}}

{{/* The quota store's settings that fit no mode, or each other (what `weighstation quota` would
refuse at start, refused at install instead). */}}
{{- define "weighstation.quota.validateRedis" -}}
{{- $r := .Values.quota.redis -}}
{{- $what := dict "single" "host:port of Redis 7 or Valkey" "sentinel" "the sentinels' host:port" "cluster" "host:port of one or more cluster nodes" -}}
{{- if and $r.address $r.addresses -}}
{{- fail "weighstation: quota.redis.address and quota.redis.addresses are both set: give the addresses once (address is the one-server shorthand)" -}}
{{- end -}}
{{- if not (or $r.address $r.addresses) -}}
{{- fail (printf "weighstation: quota.enabled needs quota.redis.addresses (%s, for quota.redis.mode=%s): the quota service keeps the replicas' reports there" (get $what $r.mode) $r.mode) -}}
{{- end -}}
{{- if and (eq $r.mode "single") (gt (len $r.addresses) 1) -}}
{{- fail (printf "weighstation: quota.redis.addresses has %d addresses in quota.redis.mode=single, which takes one: set mode sentinel for sentinels or cluster for cluster seeds" (len $r.addresses)) -}}
{{- end -}}
{{- if and (eq $r.mode "sentinel") (not $r.masterName) -}}
{{- fail "weighstation: quota.redis.mode=sentinel needs quota.redis.masterName: the name the sentinels monitor the primary by" -}}
{{- end -}}
{{- if ne $r.mode "sentinel" -}}
{{- if $r.masterName -}}
{{- fail (printf "weighstation: quota.redis.masterName is for quota.redis.mode=sentinel only, not %s" $r.mode) -}}
{{- end -}}
{{- if or $r.sentinel.username $r.sentinel.passwordSecret.name -}}
{{- fail (printf "weighstation: quota.redis.sentinel is for quota.redis.mode=sentinel only, not %s" $r.mode) -}}
{{- end -}}
{{- end -}}
{{- if and $r.username (not $r.passwordSecret.name) -}}
{{- fail "weighstation: quota.redis.username needs quota.redis.passwordSecret.name: an ACL user authenticates with a password" -}}
{{- end -}}
{{- if and $r.sentinel.username (not $r.sentinel.passwordSecret.name) -}}
{{- fail "weighstation: quota.redis.sentinel.username needs quota.redis.sentinel.passwordSecret.name: an ACL user authenticates with a password" -}}
{{- end -}}
{{- if not $r.tls.enabled -}}
{{- if or $r.tls.secretName $r.tls.clientCertificate $r.tls.serverName -}}
{{- fail "weighstation: quota.redis.tls.secretName, clientCertificate and serverName need quota.redis.tls.enabled" -}}
{{- end -}}
{{- else if and $r.tls.clientCertificate (not $r.tls.secretName) -}}
{{- fail "weighstation: quota.redis.tls.clientCertificate needs quota.redis.tls.secretName: the Secret whose tls.crt and tls.key are the client certificate" -}}
{{- end -}}
{{- end -}}

{{/* Checks values.schema.json cannot express. */}}
{{- define "weighstation.validate" -}}
{{- if and (eq .Values.policies.source "kubernetes") (not .Values.serviceAccount.create) -}}
{{- fail "weighstation: policies.source=kubernetes needs serviceAccount.create: the chart would otherwise grant the control plane's RBAC to the namespace's default ServiceAccount, which every pod there may mount" -}}
{{- end -}}
{{- if .Values.quota.enabled -}}
{{- include "weighstation.quota.validateRedis" . -}}
{{- end -}}
{{- if not (or .Values.nats.enabled .Values.kafka.enabled) -}}
{{- fail "weighstation: enable at least one of nats.enabled and kafka.enabled: with neither, the gateway has nothing to forward" -}}
{{- end -}}
{{- if and .Values.nats.enabled .Values.kafka.enabled (eq (int .Values.nats.port) (int .Values.kafka.port)) -}}
{{- fail (printf "weighstation: nats.port and kafka.port are both %d: each listener needs its own port" (int .Values.nats.port)) -}}
{{- end -}}
{{- $envoyPorts := list (int .Values.envoy.adminPort) (int .Values.envoy.metricsPort) -}}
{{- if eq (index $envoyPorts 0) (index $envoyPorts 1) -}}
{{- fail "weighstation: envoy.adminPort and envoy.metricsPort must differ" -}}
{{- end -}}
{{- range $p := list (list "nats" .Values.nats) (list "kafka" .Values.kafka) -}}
{{- $v := index $p 1 -}}
{{- if and $v.enabled (has (int $v.port) $envoyPorts) -}}
{{- fail (printf "weighstation: %s.port %d collides with Envoy's admin or metrics port" (index $p 0) (int $v.port)) -}}
{{- end -}}
{{- end -}}
{{- if .Values.kafka.enabled -}}
{{- $first := add (int .Values.kafka.port) 1 -}}
{{- $others := dict "envoy.adminPort" .Values.envoy.adminPort "envoy.metricsPort" .Values.envoy.metricsPort -}}
{{- if .Values.nats.enabled -}}
{{- $_ := set $others "nats.port" .Values.nats.port -}}
{{- if .Values.tls.nats.enabled -}}
{{- $_ := set $others "tls.nats.port" .Values.tls.nats.port -}}
{{- end -}}
{{- end -}}
{{- $c := .Values.kafka.cluster -}}
{{- if $c.enabled -}}
{{- if .Values.kafka.brokers -}}
{{- fail "weighstation: kafka.cluster.enabled and kafka.brokers are exclusive: the gateway discovers the brokers behind kafka.cluster.bootstrap, so set kafka.brokers: [] (its default lists one broker), or leave kafka.cluster.enabled off to list them" -}}
{{- end -}}
{{- if not (include "weighstation.kafka.clusterBootstrap" .) -}}
{{- fail "weighstation: kafka.cluster.enabled needs kafka.cluster.bootstrap: host:port of the brokers' bootstrap (e.g. the Kafka bootstrap Service), several comma-separated" -}}
{{- end -}}
{{- $firstId := int $c.nodeIds.first -}}
{{- $lastId := int $c.nodeIds.last -}}
{{- if gt $firstId $lastId -}}
{{- fail (printf "weighstation: kafka.cluster.nodeIds.first %d is above kafka.cluster.nodeIds.last %d: the range is first to last, both included" $firstId $lastId) -}}
{{- end -}}
{{- if ge (sub $lastId $firstId) 1024 -}}
{{- fail (printf "weighstation: kafka.cluster.nodeIds.first %d to kafka.cluster.nodeIds.last %d is %d node ids, at most 1024: each costs an Envoy listener and a Service port" $firstId $lastId (add (sub $lastId $firstId) 1)) -}}
{{- end -}}
{{- $last := add $first (sub $lastId $firstId) -}}
{{- if gt $last 65535 -}}
{{- fail (printf "weighstation: kafka.port %d leaves no room for the %d node ports of kafka.cluster.nodeIds.first %d to kafka.cluster.nodeIds.last %d: node n gets kafka.port+1+(n-first), up to %d, above 65535" (int .Values.kafka.port) (add (sub $lastId $firstId) 1) $firstId $lastId $last) -}}
{{- end -}}
{{- range $name, $port := $others -}}
{{- if and (ge (int $port) $first) (le (int $port) $last) -}}
{{- fail (printf "weighstation: %s %d is the gateway port of node id %d (kafka.cluster.nodeIds.first %d to kafka.cluster.nodeIds.last %d): node n gets kafka.port+1+(n-first), here %d to %d; move %s or kafka.port, or narrow kafka.cluster.nodeIds" $name (int $port) (add $firstId (sub (int $port) $first)) $firstId $lastId $first $last $name) -}}
{{- end -}}
{{- end -}}
{{- else -}}
{{- if not .Values.kafka.brokers -}}
{{- fail "weighstation: kafka.brokers is empty: list every broker, host:port as each advertises itself, or set kafka.cluster.enabled to have the gateway discover them" -}}
{{- end -}}
{{- $last := add (int .Values.kafka.port) (len .Values.kafka.brokers) -}}
{{- if gt $last 65535 -}}
{{- fail (printf "weighstation: kafka.port %d leaves no room for the %d broker ports: broker i gets kafka.port+1+i, up to %d, above 65535" (int .Values.kafka.port) (len .Values.kafka.brokers) $last) -}}
{{- end -}}
{{- range $name, $port := $others -}}
{{- if and (ge (int $port) $first) (le (int $port) $last) -}}
{{- $i := sub (int $port) $first -}}
{{- fail (printf "weighstation: %s %d is the gateway port of kafka.brokers[%d] (%s): broker i gets kafka.port+1+i, here %d to %d; move %s or kafka.port" $name (int $port) $i (index $.Values.kafka.brokers $i) $first $last $name) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if and (ne .Values.policies.source "kubernetes") (not .Values.policies.existingConfigMap) (not .Values.policies.files) -}}
{{- fail "weighstation: set policies.files or policies.existingConfigMap: the control plane needs a policy directory (one GatewayDefaults and a LimitPolicy for its default tenant)" -}}
{{- end -}}
{{- if and .Values.envoy.autoscaling.enabled (lt (int .Values.envoy.autoscaling.maxReplicas) (int .Values.envoy.autoscaling.minReplicas)) -}}
{{- fail "weighstation: envoy.autoscaling.maxReplicas is below minReplicas" -}}
{{- end -}}
{{- $tls := .Values.tls -}}
{{- if and (or $tls.nats.enabled $tls.kafka.enabled) (not (include "weighstation.tls.secretName" .)) -}}
{{- fail "weighstation: tls.nats.enabled and tls.kafka.enabled need the gateway's certificate: set tls.secretName (a kubernetes.io/tls Secret) or tls.certManager.enabled" -}}
{{- end -}}
{{- range $p := list "nats" "kafka" -}}
{{- $l := index $tls $p -}}
{{- if and $l.enabled (eq $l.clientCertificates "required") (not $tls.clientCASecret) -}}
{{- fail (printf "weighstation: tls.%s.clientCertificates is required: set tls.clientCASecret (a Secret whose ca.crt verifies them)" $p) -}}
{{- end -}}
{{- end -}}
{{- if and (or $tls.upstream.nats $tls.upstream.kafka) (not $tls.upstream.caSecret) -}}
{{- fail "weighstation: tls.upstream.nats and tls.upstream.kafka need tls.upstream.caSecret (a Secret whose ca.crt verifies the brokers)" -}}
{{- end -}}
{{- if and $tls.certManager.enabled (not $tls.certManager.issuerRef.name) -}}
{{- fail "weighstation: tls.certManager.enabled needs tls.certManager.issuerRef.name" -}}
{{- end -}}
{{- if and $tls.nats.enabled .Values.nats.enabled (eq (int $tls.nats.port) (int .Values.nats.port)) -}}
{{- fail (printf "weighstation: tls.nats.port and nats.port are both %d: each listener needs its own port" (int .Values.nats.port)) -}}
{{- end -}}
{{- end -}}

{{/* The Secret holding the gateway's certificate: tls.secretName, or the one cert-manager
fills (<fullname>-tls unless secretName names it). Empty without TLS. */}}
{{- define "weighstation.tls.secretName" -}}
{{- if .Values.tls.secretName -}}
{{- .Values.tls.secretName -}}
{{- else if .Values.tls.certManager.enabled -}}
{{- include "weighstation.fullname" . }}-tls
{{- end -}}
{{- end -}}

{{/* The options of a Kafka listener for `weighstation serve`: ",tls" or ",mtls", ",upstream-tls". */}}
{{- define "weighstation.kafka.listenerOptions" -}}
{{- $tls := .Values.tls -}}
{{- if $tls.kafka.enabled -}}{{ if eq $tls.kafka.clientCertificates "required" }},mtls{{ else }},tls{{ end }}{{- end -}}
{{- if $tls.upstream.kafka -}},upstream-tls{{- end -}}
{{- end -}}

{{/* Default topology spread: across zones, then nodes, best effort. */}}
{{- define "weighstation.topologySpread" -}}
{{- if .constraints -}}
{{ toYaml .constraints }}
{{- else -}}
- maxSkew: 1
  topologyKey: topology.kubernetes.io/zone
  whenUnsatisfiable: ScheduleAnyway
  labelSelector:
    matchLabels:
      {{- include "weighstation.selectorLabels" (dict "root" .root "component" .component) | nindent 6 }}
- maxSkew: 1
  topologyKey: kubernetes.io/hostname
  whenUnsatisfiable: ScheduleAnyway
  labelSelector:
    matchLabels:
      {{- include "weighstation.selectorLabels" (dict "root" .root "component" .component) | nindent 6 }}
{{- end -}}
{{- end -}}

{{- define "weighstation.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: [ALL]
{{- end -}}

{{/* The fixed node port of the clients' Service port named .name (envoy.service.nodePorts),
for a NodePort or LoadBalancer Service; nothing otherwise. */}}
{{- define "weighstation.envoy.nodePort" -}}
{{- $svc := .root.Values.envoy.service -}}
{{- $port := index $svc.nodePorts .name -}}
{{- if and $port (ne $svc.type "ClusterIP") -}}
nodePort: {{ $port }}
{{- end -}}
{{- end -}}

{{/* The TLS Secrets the control plane mounts, as a JSON list of {name, dir, secret}. */}}
{{- define "weighstation.tls.volumes" -}}
{{- $tls := .Values.tls -}}
{{- $out := list -}}
{{- if or $tls.nats.enabled $tls.kafka.enabled -}}
{{- $out = append $out (dict "name" "tls-server" "dir" "server" "secret" (include "weighstation.tls.secretName" .)) -}}
{{- with $tls.clientCASecret -}}
{{- $out = append $out (dict "name" "tls-client-ca" "dir" "client-ca" "secret" .) -}}
{{- end -}}
{{- end -}}
{{- if or $tls.upstream.nats $tls.upstream.kafka -}}
{{- $out = append $out (dict "name" "tls-upstream-ca" "dir" "upstream-ca" "secret" $tls.upstream.caSecret) -}}
{{- with $tls.upstream.clientCertificateSecret -}}
{{- $out = append $out (dict "name" "tls-upstream-client" "dir" "upstream-client" "secret" .) -}}
{{- end -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{/* The control plane's ServiceAccount: its own, or the namespace's default. */}}
{{- define "weighstation.controlPlane.serviceAccount" -}}
{{- if .Values.serviceAccount.create }}{{ include "weighstation.controlPlane.fullname" . }}{{ else }}default{{ end -}}
{{- end -}}
