#!/bin/bash
# Starts weighstation.local/kafka's broker: node.id is the pod's ordinal (a StatefulSet names
# its pods <name>-<ordinal>; the hostname is the pod's name) unless KAFKA_NODE_ID says; the
# settings are $KAFKA_CONFIG (default: the image's single-node server.properties) with
# __NODE_ID__ and __ADVERTISED_HOST__ filled in, written to $KAFKA_WORK_DIR; the storage in
# log.dirs is formatted on the first start with $KAFKA_CLUSTER_ID (every node of one cluster
# needs the same).
set -euo pipefail

host=${HOSTNAME:-$(hostname)}
ordinal=${host##*-}
if [[ ! $ordinal =~ ^[0-9]+$ ]]; then
	ordinal=0
fi
node_id=${KAFKA_NODE_ID:-$ordinal}
# The pod's name as its peers resolve it: hostname -f finds the StatefulSet's
# <pod>.<service>.<namespace>.svc… in the pod's /etc/hosts.
advertised=${KAFKA_ADVERTISED_HOST:-$(hostname -f 2>/dev/null || echo "$host")}
config=${KAFKA_CONFIG:-/opt/kafka/config/server.properties}
work=${KAFKA_WORK_DIR:-/tmp/kafka}

mkdir -p "$work"
sed -e "s/__NODE_ID__/$node_id/g" -e "s/__ADVERTISED_HOST__/$advertised/g" "$config" >"$work/server.properties"

classpath='/opt/kafka/libs/*'
java -cp "$classpath" -Dlog4j2.configurationFile=/opt/kafka/config/log4j2.yaml kafka.tools.StorageTool format \
	--ignore-formatted -t "${KAFKA_CLUSTER_ID:-d2VpZ2hzdGF0aW9uLWtmaw}" -c "$work/server.properties"
# KAFKA_HEAP_OPTS and KAFKA_OPTS as Kafka's own scripts take them (word-split on purpose).
# shellcheck disable=SC2086
exec java ${KAFKA_HEAP_OPTS:--Xms256m -Xmx512m} ${KAFKA_OPTS:-} -XX:+UseG1GC \
	-Dlog4j2.configurationFile=/opt/kafka/config/log4j2.yaml -cp "$classpath" kafka.Kafka "$work/server.properties"
