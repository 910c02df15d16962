package cluster

import (
	"fmt"
	"strings"
	"time"
)

// NATSServers are the StatefulSet's servers' client URLs, as the chart's nats.servers names them.
func NATSServers(n int) []string {
	var out []string
	for i := 0; i < n; i++ {
		out = append(out, fmt.Sprintf("nats://nats-%d.nats.nats.svc.cluster.local:4222", i))
	}
	return out
}

// natsManifest is n nats-servers with JetStream as a StatefulSet in namespace nats, clustered
// (routes by the pods' stable DNS names) when n > 1, as platform teams run NATS.
func natsManifest(n int, image string) string {
	cluster := ""
	if n > 1 {
		var routes []string
		for i := 0; i < n; i++ {
			routes = append(routes, fmt.Sprintf("nats://nats-%d.nats.nats.svc.cluster.local:6222", i))
		}
		cluster = fmt.Sprintf(`
    cluster {
      name: nats
      port: 6222
      routes: [%s]
    }`, strings.Join(routes, ", "))
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata: {name: nats}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: nats, namespace: nats}
data:
  nats.conf: |
    server_name: $POD_NAME
    port: 4222
    http: 8222
    pid_file: /var/run/nats/nats.pid
    lame_duck_duration: 30s
    lame_duck_grace_period: 5s
    jetstream {
      store_dir: /data
      max_memory_store: 64MB
      max_file_store: 1GB
    }%[1]s
---
apiVersion: v1
kind: Service
metadata: {name: nats, namespace: nats}
spec:
  clusterIP: None
  publishNotReadyAddresses: true
  selector: {app: nats}
  ports:
  - {name: client, port: 4222}
  - {name: cluster, port: 6222}
  - {name: monitor, port: 8222}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: nats, namespace: nats}
spec:
  serviceName: nats
  replicas: %[2]d
  podManagementPolicy: Parallel
  selector: {matchLabels: {app: nats}}
  template:
    metadata: {labels: {app: nats}}
    spec:
      # Lame duck mode (30s at least) and the shutdown after it.
      terminationGracePeriodSeconds: 60
      securityContext: {runAsNonRoot: true, runAsUser: 1000}
      containers:
      - name: nats
        image: %[3]s
        imagePullPolicy: IfNotPresent
        args: ["-c", "/etc/nats/nats.conf"]
        env:
        - name: POD_NAME
          valueFrom: {fieldRef: {fieldPath: metadata.name}}
        ports:
        - {name: client, containerPort: 4222}
        - {name: cluster, containerPort: 6222}
        - {name: monitor, containerPort: 8222}
        readinessProbe:
          httpGet: {path: "/healthz?js-enabled-only=true", port: 8222}
          periodSeconds: 2
        lifecycle:
          # Lame duck mode, as the NATS chart does it: clients are told to move before the
          # server stops (no shell: the image's nats-server signals the running one).
          preStop:
            exec: {command: ["nats-server", "--signal", "ldm=/var/run/nats/nats.pid"]}
        volumeMounts:
        - {name: config, mountPath: /etc/nats}
        - {name: data, mountPath: /data}
        - {name: run, mountPath: /var/run/nats}
      volumes:
      - name: run
        emptyDir: {}
      - name: config
        configMap: {name: nats}
      - name: data
        emptyDir: {}
`, cluster, n, image)
}

// kafkaManifest is n KRaft brokers (each also a controller of the quorum) as a StatefulSet in
// namespace kafka, with a bootstrap Service, as platform teams run Kafka.
func kafkaManifest(n int, image string) string {
	var voters []string
	for i := 0; i < n; i++ {
		voters = append(voters, fmt.Sprintf("%d@kafka-%d.kafka.kafka.svc.cluster.local:9093", i, i))
	}
	minISR := 1
	if n > 1 {
		minISR = 2
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata: {name: kafka}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: kafka, namespace: kafka}
data:
  server.properties: |
    process.roles=broker,controller
    node.id=__NODE_ID__
    controller.quorum.voters=%[1]s
    listeners=PLAINTEXT://:9092,CONTROLLER://:9093
    advertised.listeners=PLAINTEXT://__ADVERTISED_HOST__:9092
    controller.listener.names=CONTROLLER
    listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
    inter.broker.listener.name=PLAINTEXT
    log.dirs=/var/lib/kafka/data
    num.partitions=%[2]d
    default.replication.factor=%[2]d
    min.insync.replicas=%[3]d
    offsets.topic.replication.factor=%[2]d
    offsets.topic.num.partitions=4
    transaction.state.log.replication.factor=%[2]d
    transaction.state.log.min.isr=%[3]d
    share.coordinator.state.topic.replication.factor=%[2]d
    share.coordinator.state.topic.min.isr=%[3]d
    group.initial.rebalance.delay.ms=0
    auto.create.topics.enable=true
---
apiVersion: v1
kind: Service
metadata: {name: kafka, namespace: kafka}
spec:
  clusterIP: None
  publishNotReadyAddresses: true
  selector: {app: kafka}
  ports:
  - {name: client, port: 9092}
  - {name: controller, port: 9093}
---
apiVersion: v1
kind: Service
metadata: {name: kafka-bootstrap, namespace: kafka}
spec:
  selector: {app: kafka}
  ports:
  - {name: client, port: 9092}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: kafka, namespace: kafka}
spec:
  serviceName: kafka
  replicas: %[2]d
  podManagementPolicy: Parallel
  selector: {matchLabels: {app: kafka}}
  template:
    metadata: {labels: {app: kafka}}
    spec:
      terminationGracePeriodSeconds: 30
      securityContext: {runAsNonRoot: true, runAsUser: 1000, fsGroup: 1000}
      containers:
      - name: kafka
        image: %[4]s
        imagePullPolicy: IfNotPresent
        env:
        - {name: KAFKA_CONFIG, value: /etc/kafka/server.properties}
        - {name: KAFKA_HEAP_OPTS, value: "-Xms128m -Xmx384m"}
        ports:
        - {name: client, containerPort: 9092}
        - {name: controller, containerPort: 9093}
        readinessProbe:
          tcpSocket: {port: 9092}
          periodSeconds: 2
        volumeMounts:
        - {name: config, mountPath: /etc/kafka}
        - {name: data, mountPath: /var/lib/kafka/data}
        - {name: work, mountPath: /tmp}
      volumes:
      - name: config
        configMap: {name: kafka}
      - name: data
        emptyDir: {}
      - name: work
        emptyDir: {}
`, strings.Join(voters, ","), n, minISR, image)
}

// InstallBrokers applies both StatefulSets (they start together) and waits for every pod.
func (k *Kube) InstallBrokers(t Topology, im Images) (natsReady, kafkaReady time.Duration, err error) {
	if err := k.Apply("nats.yaml", natsManifest(t.NATS, im.NATS), ""); err != nil {
		return 0, 0, err
	}
	if err := k.Apply("kafka.yaml", kafkaManifest(t.Kafka, im.Kafka), ""); err != nil {
		return 0, 0, err
	}
	if natsReady, err = k.WaitReady("nats", "app=nats", t.NATS, 3*time.Minute); err != nil {
		return 0, 0, err
	}
	kafkaReady, err = k.WaitReady("kafka", "app=kafka", t.Kafka, 4*time.Minute)
	return natsReady, kafkaReady, err
}
