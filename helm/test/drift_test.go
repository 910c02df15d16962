package charttest

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The chart holds no Envoy configuration of its own. The Envoy pod's init container runs
// `weighstation bootstrap` from the control-plane image (the code the local stack and `make
// test` use), and listeners and clusters arrive over xDS from the same control plane. This test
// runs the init container's exact arguments through the real binary and checks the result
// against the rendered objects: if a flag is renamed, a port or Service name drifts, or the
// bootstrap stops pointing at the control plane, it fails.
func TestEnvoyBootstrapIsRenderedByTheControlPlaneBinary(t *testing.T) {
	for name, file := range valueSets(t) {
		t.Run(name, func(t *testing.T) {
			ms := mustRender(t, []string{file})
			cpDeploy := ms.find(t, "Deployment", "-control-plane")
			cpSvc := ms.find(t, "Service", "-control-plane")
			envoyDeploy := ms.find(t, "Deployment", "-envoy")
			cp := container(t, cpDeploy, "containers", "control-plane")
			initC := container(t, envoyDeploy, "initContainers", "bootstrap")
			envoy := container(t, envoyDeploy, "containers", "envoy")

			if initC["image"] != cp["image"] {
				t.Errorf("bootstrap runs %v, the control plane %v: one image must render both", initC["image"], cp["image"])
			}
			args := expandDownwardAPI(t, initC)
			if args[0] != "bootstrap" {
				t.Fatalf("init container runs %v, not `weighstation bootstrap`", args)
			}
			out, ok := flagValue(args, "output")
			if !ok || out != "/etc/envoy/bootstrap.json" {
				t.Errorf("bootstrap --output=%q", out)
			}
			if cfg, _ := envoyArg(strings_(envoy["args"]), "config-path"); cfg != out {
				t.Errorf("Envoy reads %q, the init container writes %q", cfg, out)
			}
			if mountPath(t, initC, "bootstrap") != "/etc/envoy" || mountPath(t, envoy, "bootstrap") != "/etc/envoy" {
				t.Error("the init container and Envoy do not share /etc/envoy")
			}
			path := filepath.Join(t.TempDir(), "bootstrap.json")
			if stdout, stderr, code := run(t, nil, weighBin, setFlag(args, "output", path)...); code != 0 {
				t.Fatalf("weighstation %s: exit %d\n%s%s", strings.Join(args, " "), code, stdout, stderr)
			}
			b := readBootstrap(t, path)

			if b.Node.ID != "ws-weighstation-envoy-7d9f8-x2x4q" {
				t.Errorf("node id %q, want the pod name", b.Node.ID)
			}
			svcHost := fmt.Sprintf("%s.%s.svc.cluster.local", cpSvc.name(), namespace)
			if got, want := b.cluster(t, "weighstation_xds"), net.JoinHostPort(svcHost, strconv.Itoa(servicePort(t, cpSvc, "xds"))); got != want {
				t.Errorf("Envoy's ADS cluster points at %s, the control plane Service is %s", got, want)
			}
			if got, want := b.cluster(t, "weighstation_wasm"), net.JoinHostPort(svcHost, strconv.Itoa(servicePort(t, cpSvc, "http"))); got != want {
				t.Errorf("Envoy fetches the module from %s, the control plane serves it at %s", got, want)
			}
			if b.DynamicResources.LDS.InitialFetchTimeout != "0s" || b.DynamicResources.CDS.InitialFetchTimeout != "0s" {
				t.Error("Envoy may go ready without listeners: the bootstrap does not wait for xDS")
			}

			// The control plane listens where its Service sends Envoy, and serves the module
			// under the URL it pins in xDS.
			cpArgs := strings_(cp["args"])
			for flag, port := range map[string]string{"xds-listen": "xds", "http-listen": "http"} {
				v, _ := flagValue(cpArgs, flag)
				if v != ":"+strconv.Itoa(containerPort(t, cp, port)) {
					t.Errorf("--%s=%s, container port %s is %d", flag, v, port, containerPort(t, cp, port))
				}
			}
			if u, _ := flagValue(cpArgs, "wasm-url"); u != "http://"+b.cluster(t, "weighstation_wasm")+"/wasm/weighstation_filter.wasm" {
				t.Errorf("--wasm-url=%s does not name the module on the control plane Service", u)
			}

			// Admin on localhost only; the metrics listener on the port probes and scrapes use.
			adminPort := strconv.Itoa(b.Admin.Address.SocketAddress.PortValue)
			if b.Admin.Address.SocketAddress.Address != "127.0.0.1" {
				t.Errorf("Envoy admin bound to %s", b.Admin.Address.SocketAddress.Address)
			}
			drain := container(t, envoyDeploy, "containers", "drain")
			if a, _ := flagValue(strings_(drain["args"]), "admin"); a != "127.0.0.1:"+adminPort {
				t.Errorf("the drain container asks the admin at %q, not 127.0.0.1:%s", a, adminPort)
			}
			metrics := b.listener(t, "weighstation_metrics")
			if metrics.Address != "0.0.0.0" || metrics.PortValue != containerPort(t, envoy, "metrics") {
				t.Errorf("metrics listener on %s:%d, container port metrics is %d", metrics.Address, metrics.PortValue, containerPort(t, envoy, "metrics"))
			}
			if get(envoy, "readinessProbe", "httpGet", "port") != "metrics" || get(envoy, "readinessProbe", "httpGet", "path") != "/ready" {
				t.Errorf("readiness probe %v", get(envoy, "readinessProbe"))
			}

			// Envoy's client listeners (from xDS) are where the Deployment and Service expect them.
			for _, proto := range []string{"nats", "kafka"} {
				listen, _ := flagValue(cpArgs, proto+"-listen")
				if c, ok := flagValue(cpArgs, "kafka-cluster"); ok && proto == "kafka" {
					// Discovered brokers: the bootstrap listener is --kafka-cluster's listen=
					// (--kafka-listen is empty), node FIRST's listener its BROKERS.
					if listen != "" {
						t.Errorf("--kafka-cluster beside a plain bootstrap listener --kafka-listen=%s", listen)
					}
					kc := parseKafkaCluster(t, c)
					listen = kc.options["listen"]
					if want := "0.0.0.0:" + strconv.Itoa(containerPort(t, envoy, fmt.Sprintf("kafka-node-%d", kc.first))); kc.brokers != want {
						t.Errorf("--kafka-cluster node %d listens on %s, Envoy container port kafka-node-%d is %s", kc.first, kc.brokers, kc.first, want)
					}
				}
				if listen == "" {
					if hasContainerPort(envoy, proto) {
						t.Errorf("%s disabled in the control plane but Envoy exposes port %s", proto, proto)
					}
					continue
				}
				listen, _, _ = strings.Cut(listen, ",") // the address, without TLS options
				if listen != "0.0.0.0:"+strconv.Itoa(containerPort(t, envoy, proto)) {
					t.Errorf("--%s-listen=%s, Envoy container port %s is %d", proto, listen, proto, containerPort(t, envoy, proto))
				}
			}

			if out, stderr, code := run(t, nil, envoyBin, "--mode", "validate", "-c", path); code != 0 || !strings.Contains(out+stderr, "OK") {
				t.Errorf("envoy --mode validate: exit %d\n%s%s", code, out, stderr)
			}
		})
	}
}

// The image the chart runs (make image; its OCI layout in IMAGE_LAYOUT, its root filesystem
// unpacked where WEIGHSTATION points) carries what the chart names: the binary as entrypoint,
// the module at --serve-wasm, the user the pod runs as.
func TestControlPlaneImageCarriesWhatTheChartRuns(t *testing.T) {
	cfg, digest := imageConfig(t, envOr("IMAGE_LAYOUT", filepath.Join(root, ".tools", "image", "oci")))
	rootfs := strings.TrimSuffix(weighBin, "/usr/local/bin/weighstation")
	// Pinned by the digest make image printed, as docs/operations.md has users do.
	ms := mustRender(t, nil, "controlPlane.image.repository=registry.example.com/weighstation", "controlPlane.image.digest="+digest)
	cpDeploy := ms.find(t, "Deployment", "-control-plane")
	cp := container(t, cpDeploy, "containers", "control-plane")
	if cp["image"] != "registry.example.com/weighstation@"+digest {
		t.Errorf("pinned by digest, the chart runs %v", cp["image"])
	}

	if len(cfg.Entrypoint) != 1 || cfg.Entrypoint[0] != "/usr/local/bin/weighstation" {
		t.Errorf("the image's entrypoint is %q, not /usr/local/bin/weighstation", cfg.Entrypoint)
	}
	if _, ok := cp["command"]; ok {
		t.Error("the chart overrides the image's entrypoint")
	}
	serveWasm, _ := flagValue(strings_(cp["args"]), "serve-wasm")
	if _, err := os.Stat(filepath.Join(rootfs, serveWasm)); err != nil || rootfs == weighBin {
		t.Errorf("the chart serves %s, which the image (unpacked at %s) does not carry: %v", serveWasm, rootfs, err)
	}
	runAs := fmt.Sprint(get(cpDeploy, "spec", "template", "spec", "securityContext", "runAsUser"))
	if user, _, _ := strings.Cut(cfg.User, ":"); user != runAs {
		t.Errorf("image user %q, chart runAsUser %v", cfg.User, runAs)
	}
}

// containerConfig is the part of an OCI image config the chart depends on.
type containerConfig struct {
	Entrypoint []string
	User       string
}

// imageConfig reads the config of the one image of an OCI layout (index.json → manifest →
// config), as a registry client would, and the image's digest.
func imageConfig(t *testing.T, dir string) (containerConfig, string) {
	t.Helper()
	blob := func(digest string) []byte {
		return []byte(readFile(t, filepath.Join(dir, "blobs", strings.Replace(digest, ":", "/", 1))))
	}
	var index struct{ Manifests []struct{ Digest string } }
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(dir, "index.json"))), &index); err != nil || len(index.Manifests) != 1 {
		t.Fatalf("%s/index.json: %v, %d manifests (run make image)", dir, err, len(index.Manifests))
	}
	var manifest struct{ Config struct{ Digest string } }
	if err := json.Unmarshal(blob(index.Manifests[0].Digest), &manifest); err != nil {
		t.Fatal(err)
	}
	var config struct{ Config containerConfig }
	if err := json.Unmarshal(blob(manifest.Config.Digest), &config); err != nil {
		t.Fatal(err)
	}
	return config.Config, index.Manifests[0].Digest
}

func expandDownwardAPI(t *testing.T, c map[string]any) []string {
	t.Helper()
	vals := map[string]string{}
	for _, e := range get(c, "env").([]any) {
		m := e.(map[string]any)
		if get(m, "valueFrom", "fieldRef", "fieldPath") == "metadata.name" {
			vals[m["name"].(string)] = "ws-weighstation-envoy-7d9f8-x2x4q"
		}
	}
	var out []string
	for _, a := range strings_(c["args"]) {
		for k, v := range vals {
			a = strings.ReplaceAll(a, "$("+k+")", v)
		}
		if strings.Contains(a, "$(") {
			t.Fatalf("argument %q references an undefined variable", a)
		}
		out = append(out, a)
	}
	return out
}

func mountPath(t *testing.T, c map[string]any, volume string) string {
	t.Helper()
	for _, m := range c["volumeMounts"].([]any) {
		if mm := m.(map[string]any); mm["name"] == volume {
			return mm["mountPath"].(string)
		}
	}
	return ""
}

func hasContainerPort(c map[string]any, name string) bool {
	for _, p := range c["ports"].([]any) {
		if p.(map[string]any)["name"] == name {
			return true
		}
	}
	return false
}

func containerPort(t *testing.T, c map[string]any, name string) int {
	t.Helper()
	for _, p := range c["ports"].([]any) {
		if m := p.(map[string]any); m["name"] == name {
			return m["containerPort"].(int)
		}
	}
	t.Fatalf("container %v has no port %q", c["name"], name)
	return 0
}

// bootstrap is the part of Envoy's bootstrap JSON the tests read.
type socketAddress struct {
	Address   string `json:"address"`
	PortValue int    `json:"portValue"`
}

type bootstrap struct {
	Node  struct{ ID string }
	Admin struct {
		Address struct {
			SocketAddress socketAddress `json:"socketAddress"`
		} `json:"address"`
	} `json:"admin"`
	StaticResources struct {
		Clusters []struct {
			Name           string
			LoadAssignment struct {
				Endpoints []struct {
					LbEndpoints []struct {
						Endpoint struct {
							Address struct {
								SocketAddress socketAddress `json:"socketAddress"`
							} `json:"address"`
						} `json:"endpoint"`
					} `json:"lbEndpoints"`
				} `json:"endpoints"`
			} `json:"loadAssignment"`
		} `json:"clusters"`
		Listeners []struct {
			Name    string
			Address struct {
				SocketAddress socketAddress `json:"socketAddress"`
			} `json:"address"`
		} `json:"listeners"`
	} `json:"staticResources"`
	DynamicResources struct {
		LDS struct {
			InitialFetchTimeout string `json:"initialFetchTimeout"`
		} `json:"ldsConfig"`
		CDS struct {
			InitialFetchTimeout string `json:"initialFetchTimeout"`
		} `json:"cdsConfig"`
	} `json:"dynamicResources"`
}

func readBootstrap(t *testing.T, path string) *bootstrap {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var b bootstrap
	if err := json.Unmarshal(raw, &b); err != nil {
		t.Fatalf("bootstrap: %v", err)
	}
	return &b
}

// cluster returns a static cluster's single endpoint as host:port.
func (b *bootstrap) cluster(t *testing.T, name string) string {
	t.Helper()
	for _, c := range b.StaticResources.Clusters {
		if c.Name == name && len(c.LoadAssignment.Endpoints) == 1 && len(c.LoadAssignment.Endpoints[0].LbEndpoints) == 1 {
			sa := c.LoadAssignment.Endpoints[0].LbEndpoints[0].Endpoint.Address.SocketAddress
			return net.JoinHostPort(sa.Address, strconv.Itoa(sa.PortValue))
		}
	}
	t.Fatalf("bootstrap has no static cluster %s with one endpoint", name)
	return ""
}

func (b *bootstrap) listener(t *testing.T, name string) socketAddress {
	t.Helper()
	for _, l := range b.StaticResources.Listeners {
		if l.Name == name {
			return l.Address.SocketAddress
		}
	}
	t.Fatalf("bootstrap has no static listener %s", name)
	return socketAddress{}
}

// The chart runs the Envoy release `make test` proves the filter against.
func TestChartRunsTheEnvoyVersionTheTestsUse(t *testing.T) {
	m := regexp.MustCompile(`(?m)^ENVOY_VERSION=(\S+)$`).FindStringSubmatch(readFile(t, filepath.Join(root, "scripts", "install-tools.sh")))
	if m == nil {
		t.Fatal("scripts/install-tools.sh has no ENVOY_VERSION")
	}
	envoy := container(t, mustRender(t, nil).find(t, "Deployment", "-envoy"), "containers", "envoy")
	if want := "envoyproxy/envoy:v" + m[1]; envoy["image"] != want {
		t.Errorf("the chart runs %v, the tests use Envoy %s (%s)", envoy["image"], m[1], want)
	}
}
