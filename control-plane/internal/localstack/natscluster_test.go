package localstack

import (
	"strings"
	"testing"
)

func renderFor(t *testing.T, natsServers, i int) string {
	t.Helper()
	s := &Stack{
		cfg:      Config{WorkDir: "/w", NATSServers: natsServers, Ports: Ports{NATSUpstream: 14222, NATSMonitor: 18222, NATSCluster: 16222}},
		security: &security{proxyPublic: "UPROXY"},
	}
	b, err := s.renderNATSConfig(i)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// One server is configured as it always was: no name, no cluster, the one JetStream store.
func TestOneNATSServerHasNoCluster(t *testing.T) {
	for _, n := range []int{0, 1} {
		conf := renderFor(t, n, 0)
		for _, absent := range []string{"server_name", "cluster", "lame_duck"} {
			if strings.Contains(conf, absent) {
				t.Errorf("NATSServers=%d: %s in\n%s", n, absent, conf)
			}
		}
		for _, want := range []string{`listen: "127.0.0.1:14222"`, `http: "127.0.0.1:18222"`, `store_dir: "/w/jetstream"` + "\n"} {
			if !strings.Contains(conf, want) {
				t.Errorf("NATSServers=%d: no %s in\n%s", n, want, conf)
			}
		}
	}
}

// Server i of a cluster listens on every port + i, keeps a store of its own and routes to every
// member but itself.
func TestClusterMemberRoutesToTheOthers(t *testing.T) {
	conf := renderFor(t, 3, 1)
	for _, want := range []string{
		"server_name: nats-1\n", `listen: "127.0.0.1:14223"`, `http: "127.0.0.1:18223"`,
		"cluster {\n  name: weighstation\n  listen: \"127.0.0.1:16223\"\n  routes: [\n" +
			"    \"nats-route://127.0.0.1:16222\"\n    \"nats-route://127.0.0.1:16224\"\n  ]\n}",
		`store_dir: "/w/jetstream-1"`, "user: acme, password: acme-secret, proxy_required: true",
	} {
		if !strings.Contains(conf, want) {
			t.Errorf("no %s in\n%s", want, conf)
		}
	}
}
