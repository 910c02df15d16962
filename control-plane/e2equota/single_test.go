package e2equota

import (
	"bytes"
	"crypto/x509/pkix"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weighstation/weighstation/control-plane/internal/devcerts"
	"github.com/weighstation/weighstation/control-plane/internal/localstack"
	"github.com/weighstation/weighstation/control-plane/internal/quota"
)

// One server with TLS (client certificates required) and an ACL user: the quota service
// reaches it with the flags an operator gives, its password from a file, and answers a
// replica's report; with the wrong password its /healthz says why it cannot.
func TestQuotaReachesOneServerWithTLSAndAUser(t *testing.T) {
	dir := t.TempDir()
	ca, err := devcerts.NewCA("test redis CA")
	if err != nil {
		t.Fatal(err)
	}
	server, err := ca.Server("redis", "redis.test")
	if err != nil {
		t.Fatal(err)
	}
	client, err := ca.Client(pkix.Name{CommonName: "quota"})
	if err != nil {
		t.Fatal(err)
	}
	for name, pair := range map[string]devcerts.Pair{"server": server, "client": client} {
		if err := pair.Write(dir, name); err != nil {
			t.Fatal(err)
		}
	}
	path := func(name string) string { return filepath.Join(dir, name) }
	if err := os.WriteFile(path("ca.crt"), ca.PEM, 0o644); err != nil {
		t.Fatal(err)
	}
	redisPort, err := localstack.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	startProcess(t, "redis-server", filepath.Join(root, ".tools/bin/redis-server"),
		"--bind", "127.0.0.1", "--port", "0", "--tls-port", strconv.Itoa(redisPort), "--save", "", "--appendonly", "no",
		"--tls-cert-file", path("server.crt"), "--tls-key-file", path("server.key"), "--tls-ca-cert-file", path("ca.crt"),
		"--tls-auth-clients", "yes", "--user", "default", "off", "--user", "quota", "on", ">quota-secret", "~*", "+@all")
	waitFor(t, 10*time.Second, "redis-server listens", func() bool {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", redisPort))
		if err == nil {
			c.Close()
		}
		return err == nil
	})

	for _, c := range []struct {
		name, password string
		healthy        bool
		says           string
	}{
		{"the right password", "quota-secret", true, "ok"},
		{"a wrong password", "not-it", false, "WRONGPASS"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := os.WriteFile(path("password"), []byte(c.password+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			port, err := localstack.FreePort()
			if err != nil {
				t.Fatal(err)
			}
			startProcess(t, "quota", filepath.Join(root, ".tools/bin/weighstation"), "quota", "--listen", fmt.Sprintf("127.0.0.1:%d", port),
				"--redis-mode", "single", "--redis", fmt.Sprintf("127.0.0.1:%d", redisPort), "--redis-username", "quota",
				"--redis-password-file", path("password"), "--redis-tls", "--redis-tls-ca", path("ca.crt"),
				"--redis-tls-cert", path("client.crt"), "--redis-tls-key", path("client.key"), "--redis-tls-server-name", "redis.test")
			var code int
			var body string
			waitFor(t, 10*time.Second, "the quota service answers /healthz", func() bool {
				resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", port))
				if err != nil {
					return false
				}
				defer resp.Body.Close()
				var b bytes.Buffer
				_, _ = b.ReadFrom(resp.Body)
				code, body = resp.StatusCode, b.String()
				return true
			})
			if (code == http.StatusOK) != c.healthy || !strings.Contains(body, c.says) {
				t.Fatalf("/healthz answered %d %q: want healthy %v, saying %q", code, body, c.healthy, c.says)
			}
			if !c.healthy {
				return
			}
			req, _ := json.Marshal(quota.SharesRequest{Replica: "replica-0", Limits: []quota.LimitReport{{Key: "nats/orders/rate", PerSecond: 100, Admitted: 50, Connections: 1}}})
			resp, err := http.Post(fmt.Sprintf("http://127.0.0.1:%d%s", port, quota.SharesPath), "application/json", bytes.NewReader(req))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var shares quota.SharesResponse
			if err := json.NewDecoder(resp.Body).Decode(&shares); err != nil || resp.StatusCode != http.StatusOK || len(shares.Limits) != 1 || shares.Limits[0].Replicas != 1 {
				t.Fatalf("shares: %d %+v %v", resp.StatusCode, shares, err)
			}
		})
	}
}

// startProcess runs bin, its output in the test's log on failure, stopped by its PID when the
// test ends.
func startProcess(t *testing.T, name, bin string, args ...string) {
	t.Helper()
	var out bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(cmd.Process.Pid, syscall.SIGTERM)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("%s output:\n%s", name, out.String())
		}
	})
}
