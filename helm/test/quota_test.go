package charttest

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
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

// quota.enabled without a Redis address fails with a message that says what to set.
func TestQuotaNeedsRedis(t *testing.T) {
	_, stderr, code := render(t, kubeVersions[0], nil, "quota.enabled=true")
	if code == 0 || !strings.Contains(stderr, "quota.enabled needs quota.redis.address") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
}

func toJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
