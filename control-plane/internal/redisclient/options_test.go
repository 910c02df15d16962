package redisclient

import (
	"crypto/x509/pkix"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/weighstation/weighstation/control-plane/internal/devcerts"
)

// Each combination that cannot work is refused with the flag to change and why.
func TestCheckRefusesWhatCannotWork(t *testing.T) {
	sentinel := func(edit func(*Options)) Options {
		o := Options{Mode: Sentinel, Addrs: []string{"s0:26379", "s1:26379"}, MasterName: "quota"}
		if edit != nil {
			edit(&o)
		}
		return o
	}
	cases := []struct {
		name string
		opts Options
		want string // "" accepted
	}{
		{"one server", Options{Mode: Single, Addrs: []string{"redis:6379"}}, ""},
		{"one server by IPv6", Options{Mode: Single, Addrs: []string{"[::1]:6379"}}, ""},
		{"sentinels with auth of their own", sentinel(func(o *Options) {
			o.Password, o.SentinelUsername, o.SentinelPassword = "data", "watcher", "watch"
		}), ""},
		{"cluster from one seed", Options{Mode: Cluster, Addrs: []string{"redis-cluster:6379"}}, ""},
		{"TLS with a client certificate", Options{Mode: Cluster, Addrs: []string{"a:1", "b:2"},
			TLS: TLS{Enabled: true, CAFile: "ca.crt", CertFile: "c.crt", KeyFile: "c.key", ServerName: "redis"}}, ""},
		{"unknown mode", Options{Mode: "ring", Addrs: []string{"a:1"}}, `--redis-mode="ring": want one of single, sentinel, cluster`},
		{"no address", Options{Mode: Cluster}, "--redis: no address given (host:port of one or more cluster nodes, comma-separated)"},
		{"address without a port", Options{Mode: Sentinel, Addrs: []string{"s0:26379", "s1"}, MasterName: "m"},
			`--redis: address 2 "s1" is not host:port (the sentinels' host:port, comma-separated)`},
		{"port out of range", Options{Mode: Single, Addrs: []string{"redis:70000"}}, `address 1 "redis:70000" is not host:port`},
		{"no host", Options{Mode: Single, Addrs: []string{":6379"}}, `address 1 ":6379" is not host:port`},
		{"several servers in single mode", Options{Mode: Single, Addrs: []string{"a:1", "b:2"}},
			"--redis: 2 addresses in --redis-mode=single, which takes one"},
		{"sentinel without a master name", sentinel(func(o *Options) { o.MasterName = "" }),
			"--redis-mode=sentinel needs --redis-master"},
		{"master name outside sentinel mode", Options{Mode: Cluster, Addrs: []string{"a:1"}, MasterName: "m"},
			"--redis-master is for --redis-mode=sentinel only, not cluster"},
		{"sentinel user outside sentinel mode", Options{Mode: Single, Addrs: []string{"a:1"}, SentinelUsername: "u", SentinelPassword: "p"},
			"--redis-sentinel-username is for --redis-mode=sentinel only, not single"},
		{"sentinel password outside sentinel mode", Options{Mode: Single, Addrs: []string{"a:1"}, SentinelPassword: "p"},
			"a Sentinel password (REDIS_SENTINEL_PASSWORD or --redis-sentinel-password-file) is for --redis-mode=sentinel only"},
		{"user without a password", Options{Mode: Single, Addrs: []string{"a:1"}, Username: "quota"},
			"--redis-username needs a password"},
		{"sentinel user without a password", sentinel(func(o *Options) { o.SentinelUsername = "watcher" }),
			"--redis-sentinel-username needs a password"},
		{"TLS file without TLS", Options{Mode: Single, Addrs: []string{"a:1"}, TLS: TLS{CAFile: "ca.crt"}},
			"--redis-tls-ca needs --redis-tls"},
		{"server name without TLS", Options{Mode: Single, Addrs: []string{"a:1"}, TLS: TLS{ServerName: "redis"}},
			"--redis-tls-server-name needs --redis-tls"},
		{"client certificate without its key", Options{Mode: Single, Addrs: []string{"a:1"}, TLS: TLS{Enabled: true, CertFile: "c.crt"}},
			"--redis-tls-cert and --redis-tls-key go together"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.opts.Check()
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want != "" && err == nil:
				t.Fatalf("accepted, want %q", c.want)
			case c.want != "" && !strings.Contains(err.Error(), c.want):
				t.Fatalf("error %q, want it to say %q", err, c.want)
			}
		})
	}
}

// Each mode gets go-redis's client for it: a cluster client even from one seed, a
// Sentinel-backed failover client with the sentinels' own credentials apart from the data
// nodes', and a plain client for one server.
func TestUniversalPicksTheClientOfTheMode(t *testing.T) {
	cases := []struct {
		name        string
		opts        Options
		cluster     bool
		masterName  string
		sentinelPwd string
	}{
		{"single", Options{Mode: Single, Addrs: []string{"redis:6379"}, Password: "data"}, false, "", ""},
		{"sentinel", Options{Mode: Sentinel, Addrs: []string{"s0:26379", "s1:26379", "s2:26379"}, MasterName: "quota",
			Password: "data", SentinelUsername: "watcher", SentinelPassword: "watch"}, false, "quota", "watch"},
		{"cluster from one seed", Options{Mode: Cluster, Addrs: []string{"redis-cluster:6379"}, Password: "data"}, true, "", ""},
		{"cluster from seeds", Options{Mode: Cluster, Addrs: []string{"a:6379", "b:6379"}}, true, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			u, err := c.opts.Universal()
			if err != nil {
				t.Fatal(err)
			}
			if u.MasterName != c.masterName || u.SentinelPassword != c.sentinelPwd || u.Password != c.opts.Password {
				t.Errorf("master %q, sentinel password %q, password %q", u.MasterName, u.SentinelPassword, u.Password)
			}
			if u.DialTimeout != timeout || u.ReadTimeout != timeout || u.WriteTimeout != timeout {
				t.Errorf("timeouts dial %s read %s write %s, want %s", u.DialTimeout, u.ReadTimeout, u.WriteTimeout, timeout)
			}
			rdb := redis.NewUniversalClient(u)
			defer rdb.Close()
			if _, isCluster := rdb.(*redis.ClusterClient); isCluster != c.cluster {
				t.Errorf("client %T, want a cluster client: %v", rdb, c.cluster)
			}
		})
	}
}

// TLS: the CA replaces the system roots, the client certificate is loaded, the server name is
// kept; unreadable or wrong files are named.
func TestTLSFiles(t *testing.T) {
	dir := t.TempDir()
	ca, err := devcerts.NewCA("test redis CA")
	if err != nil {
		t.Fatal(err)
	}
	write(t, dir, "ca.crt", ca.PEM)
	write(t, dir, "not-pem.crt", []byte("hello"))
	client, err := ca.Client(pkix.Name{CommonName: "quota"})
	if err != nil {
		t.Fatal(err)
	}
	if err := client.Write(dir, "client"); err != nil {
		t.Fatal(err)
	}
	path := func(name string) string { return filepath.Join(dir, name) }
	cases := []struct {
		name string
		tls  TLS
		want string // "" accepted
	}{
		{"CA, client certificate and server name", TLS{Enabled: true, CAFile: path("ca.crt"), CertFile: path("client.crt"), KeyFile: path("client.key"), ServerName: "redis.internal"}, ""},
		{"system roots", TLS{Enabled: true}, ""},
		{"missing CA", TLS{Enabled: true, CAFile: path("nope.crt")}, "--redis-tls-ca: open " + path("nope.crt")},
		{"CA that is not PEM", TLS{Enabled: true, CAFile: path("not-pem.crt")}, "--redis-tls-ca " + path("not-pem.crt") + ": no PEM certificate in it"},
		{"key of another file", TLS{Enabled: true, CertFile: path("client.crt"), KeyFile: path("ca.crt")}, "--redis-tls-cert " + path("client.crt") + " with --redis-tls-key " + path("ca.crt")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			u, err := Options{Mode: Single, Addrs: []string{"redis:6379"}, TLS: c.tls}.Universal()
			if c.want != "" {
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("error %v, want it to say %q", err, c.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			cfg := u.TLSConfig
			if cfg == nil || cfg.ServerName != c.tls.ServerName || (cfg.RootCAs != nil) != (c.tls.CAFile != "") || len(cfg.Certificates) != map[bool]int{true: 1}[c.tls.CertFile != ""] {
				t.Fatalf("TLS config %+v from %+v", cfg, c.tls)
			}
		})
	}
	u, err := Options{Mode: Single, Addrs: []string{"redis:6379"}}.Universal()
	if err != nil || u.TLSConfig != nil {
		t.Fatalf("TLS off: config %v, err %v", u.TLSConfig, err)
	}
}

func write(t *testing.T, dir, name string, b []byte) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
		t.Fatal(err)
	}
}
