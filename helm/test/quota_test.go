package charttest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Three replicas with global limits: the in-chart quota service (the control plane's image
// running `weighstation quota` against the given Redis, its password from the Secret), a headless
// Service of the Envoy pods the control plane counts replicas by, and NOTES giving the address
// the policies already use.
func TestGlobalQuotaWithThreeReplicas(t *testing.T) {
	ms := mustRender(t, []string{"values/global-quota.yaml"})
	quota := ms.find(t, "Deployment", "-quota")
	c := container(t, quota, "containers", "quota")
	args := strings_(c["args"])
	if args[0] != "quota" {
		t.Fatalf("quota container runs %v", args)
	}
	if v, _ := flagValue(args, "redis"); v != "redis-master.redis.svc.cluster.local:6379" {
		t.Errorf("--redis=%q", v)
	}
	if !strings.Contains(toJSON(t, c["env"]), `"name":"redis-auth"`) {
		t.Errorf("REDIS_PASSWORD not from the Secret: %s", toJSON(t, c["env"]))
	}
	svc := ms.find(t, "Service", "-quota")
	address := svc.name() + "." + namespace + ".svc.cluster.local:8090"
	if got := get(svc, "spec", "ports", 0, "port"); got != float64(8090) && got != 8090 {
		t.Errorf("quota Service port %v", got)
	}

	peers := ms.find(t, "Service", "-envoy-peers")
	if get(peers, "spec", "clusterIP") != "None" {
		t.Errorf("peers Service is not headless: %v", get(peers, "spec", "clusterIP"))
	}
	envoy := ms.find(t, "Deployment", "-envoy")
	if toJSON(t, get(peers, "spec", "selector")) != toJSON(t, get(envoy, "spec", "selector", "matchLabels")) {
		t.Errorf("peers select %s, Envoy pods are %s", toJSON(t, get(peers, "spec", "selector")), toJSON(t, get(envoy, "spec", "selector", "matchLabels")))
	}
	cp := container(t, ms.find(t, "Deployment", "-control-plane"), "containers", "control-plane")
	if v, _ := flagValue(strings_(cp["args"]), "count-replicas-dns"); v != peers.name()+"."+namespace+".svc.cluster.local" {
		t.Errorf("control plane counts replicas by %q", v)
	}
	if fmt.Sprint(get(ms.find(t, "HorizontalPodAutoscaler", "-envoy"), "spec", "minReplicas")) != "3" {
		t.Error("HPA minReplicas is not 3")
	}
	if !ms.has("NetworkPolicy") || ms.find(t, "NetworkPolicy", "-quota").name() == "" {
		t.Error("no NetworkPolicy for the quota service")
	}

	notes := renderNotes(t, "values/global-quota.yaml")
	if !strings.Contains(notes, `spec.quotaService: { address: "`+address+`" }`) {
		t.Errorf("NOTES do not give the quota address %s:\n%s", address, notes)
	}
	if !strings.Contains(readFile(t, "values/global-quota.yaml"), address) {
		t.Errorf("the value set's policy does not use %s", address)
	}
}

// The store in each mode: the quota container's --redis-* flags, its passwords from the Secrets
// in the environment (never in an argument) and the TLS Secret mounted where the flags look.
func TestQuotaStoreInEachMode(t *testing.T) {
	const tlsDir = "/etc/weighstation/redis-tls"
	cases := []struct {
		name  string
		files []string
		sets  []string
		args  []string          // the container's arguments after --listen
		env   map[string]string // variable → Secret/key
		mount string            // the TLS Secret mounted at tlsDir ("" none)
	}{
		{name: "one server by its address", files: []string{"values/global-quota.yaml"},
			args: []string{"--redis-mode=single", "--redis=redis-master.redis.svc.cluster.local:6379"},
			env:  map[string]string{"REDIS_PASSWORD": "redis-auth/password"}},
		{name: "sentinels with TLS and auth of their own", files: []string{"values/global-quota-sentinel.yaml"},
			args: []string{"--redis-mode=sentinel",
				"--redis=redis-sentinel-0.redis-sentinel.redis.svc.cluster.local:26379,redis-sentinel-1.redis-sentinel.redis.svc.cluster.local:26379,redis-sentinel-2.redis-sentinel.redis.svc.cluster.local:26379",
				"--redis-master=weighstation-quota", "--redis-sentinel-username=watcher",
				"--redis-tls", "--redis-tls-ca=" + tlsDir + "/ca.crt", "--redis-tls-cert=" + tlsDir + "/tls.crt", "--redis-tls-key=" + tlsDir + "/tls.key",
				"--redis-tls-server-name=redis.redis.svc.cluster.local"},
			env:   map[string]string{"REDIS_PASSWORD": "redis-auth/password", "REDIS_SENTINEL_PASSWORD": "redis-sentinel-auth/sentinel-password"},
			mount: "redis-client-tls"},
		{name: "a cluster from seeds, TLS to the system roots, an ACL user", files: []string{"values/global-quota.yaml"},
			sets: []string{"quota.redis.mode=cluster", "quota.redis.address=", "quota.redis.addresses={redis-0.redis:6379,redis-1.redis:6379}",
				"quota.redis.username=quota", "quota.redis.tls.enabled=true"},
			args: []string{"--redis-mode=cluster", "--redis=redis-0.redis:6379,redis-1.redis:6379", "--redis-username=quota", "--redis-tls"},
			env:  map[string]string{"REDIS_PASSWORD": "redis-auth/password"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ms := mustRender(t, c.files, c.sets...)
			deploy := ms.find(t, "Deployment", "-quota")
			q := container(t, deploy, "containers", "quota")
			args := strings_(q["args"])
			if want := append([]string{"quota", "--listen=:8090"}, c.args...); strings.Join(args, " ") != strings.Join(want, " ") {
				t.Errorf("quota runs\n  %v\nwant\n  %v", args, want)
			}
			env := map[string]string{}
			for _, e := range anySlice(q["env"]) {
				ref := get(e, "valueFrom", "secretKeyRef")
				env[fmt.Sprint(get(e, "name"))] = fmt.Sprint(get(ref, "name")) + "/" + fmt.Sprint(get(ref, "key"))
			}
			if toJSON(t, env) != toJSON(t, c.env) {
				t.Errorf("environment from Secrets %v, want %v", env, c.env)
			}
			mounted := ""
			if vols := anySlice(get(deploy, "spec", "template", "spec", "volumes")); len(vols) > 0 {
				mounted = fmt.Sprint(get(vols[0], "secret", "secretName"))
				if get(anySlice(q["volumeMounts"])[0], "mountPath") != tlsDir {
					t.Errorf("TLS Secret mounted at %v, want %s", get(anySlice(q["volumeMounts"])[0], "mountPath"), tlsDir)
				}
			}
			if mounted != c.mount {
				t.Errorf("TLS Secret mounted: %q, want %q", mounted, c.mount)
			}
		})
	}
}

// The quota binary accepts the arguments the chart renders in each mode: it starts and its
// /healthz answers (503: no store at these addresses), with the Secrets' files and variables
// stood in for.
func TestQuotaAcceptsTheRenderedArguments(t *testing.T) {
	for name, sets := range map[string][]string{
		"single": nil,
		"sentinel": {"quota.redis.mode=sentinel", "quota.redis.address=", "quota.redis.addresses={s0.redis:26379,s1.redis:26379}", "quota.redis.masterName=m",
			"quota.redis.sentinel.passwordSecret.name=sentinel-auth", "quota.redis.tls.enabled=true", "quota.redis.tls.secretName=redis-tls", "quota.redis.tls.clientCertificate=true"},
		"cluster": {"quota.redis.mode=cluster", "quota.redis.address=", "quota.redis.addresses={r0.redis:6379}", "quota.redis.tls.enabled=true", "quota.redis.tls.serverName=redis"},
	} {
		t.Run(name, func(t *testing.T) {
			ms := mustRender(t, []string{"values/global-quota.yaml"}, sets...)
			args := strings_(container(t, ms.find(t, "Deployment", "-quota"), "containers", "quota")["args"])
			port := freePorts(t, 1)[0]
			args = setFlag(args, "listen", fmt.Sprintf("127.0.0.1:%d", port))
			args = withTLSFiles(t, args)
			t.Setenv("REDIS_PASSWORD", "data-secret")
			if name == "sentinel" {
				t.Setenv("REDIS_SENTINEL_PASSWORD", "sentinel-secret")
			}
			log := filepath.Join(t.TempDir(), "quota.log")
			t.Cleanup(func() {
				if t.Failed() {
					b, _ := os.ReadFile(log)
					t.Logf("weighstation %s\n%s", strings.Join(args, " "), b)
				}
			})
			p := start(t, log, weighBin, args...)
			p.waitHTTP(t, fmt.Sprintf("http://127.0.0.1:%d/healthz", port), 503, 10*time.Second)
		})
	}
}

// Store settings that cannot work are refused at install, each naming the value to set.
func TestQuotaStoreBadValues(t *testing.T) {
	on := []string{"quota.enabled=true"}
	cases := []struct {
		name string
		sets []string
		want string
	}{
		{"no address", nil, "quota.enabled needs quota.redis.addresses (host:port of Redis 7 or Valkey, for quota.redis.mode=single)"},
		{"sentinel without addresses", []string{"quota.redis.mode=sentinel", "quota.redis.masterName=m"},
			"quota.enabled needs quota.redis.addresses (the sentinels' host:port, for quota.redis.mode=sentinel)"},
		{"address and addresses", []string{"quota.redis.address=a:1", "quota.redis.addresses={b:1}"},
			"quota.redis.address and quota.redis.addresses are both set"},
		{"two servers in single mode", []string{"quota.redis.addresses={a:1,b:1}"},
			"quota.redis.addresses has 2 addresses in quota.redis.mode=single, which takes one"},
		{"sentinel without a master name", []string{"quota.redis.mode=sentinel", "quota.redis.addresses={s:26379}"},
			"quota.redis.mode=sentinel needs quota.redis.masterName"},
		{"master name in cluster mode", []string{"quota.redis.mode=cluster", "quota.redis.addresses={a:1}", "quota.redis.masterName=m"},
			"quota.redis.masterName is for quota.redis.mode=sentinel only, not cluster"},
		{"sentinel auth in single mode", []string{"quota.redis.address=a:1", "quota.redis.sentinel.passwordSecret.name=s"},
			"quota.redis.sentinel is for quota.redis.mode=sentinel only, not single"},
		{"a user without a password", []string{"quota.redis.address=a:1", "quota.redis.username=quota"},
			"quota.redis.username needs quota.redis.passwordSecret.name"},
		{"a sentinel user without a password", []string{"quota.redis.mode=sentinel", "quota.redis.addresses={s:26379}", "quota.redis.masterName=m", "quota.redis.sentinel.username=w"},
			"quota.redis.sentinel.username needs quota.redis.sentinel.passwordSecret.name"},
		{"a TLS Secret without TLS", []string{"quota.redis.address=a:1", "quota.redis.tls.secretName=t"},
			"quota.redis.tls.secretName, clientCertificate and serverName need quota.redis.tls.enabled"},
		{"a client certificate without its Secret", []string{"quota.redis.address=a:1", "quota.redis.tls.enabled=true", "quota.redis.tls.clientCertificate=true"},
			"quota.redis.tls.clientCertificate needs quota.redis.tls.secretName"},
		{"unknown mode", []string{"quota.redis.mode=ring", "quota.redis.address=a:1"},
			"at '/quota/redis/mode'"},
		{"address without a port", []string{"quota.redis.mode=cluster", "quota.redis.addresses={redis-0}"},
			"at '/quota/redis/addresses/0'"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, stderr, code := render(t, kubeVersions[0], nil, append(on, c.sets...)...)
			if code == 0 || !strings.Contains(stderr, c.want) {
				t.Fatalf("exit %d: %s\nwant it to say %q", code, stderr, c.want)
			}
		})
	}
}

func anySlice(v any) []any { s, _ := v.([]any); return s }

func toJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
