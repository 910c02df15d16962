package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"

	"github.com/weighstation/weighstation/control-plane/internal/localstack"
)

// A second stack, NATS only: nats-server in operator mode (user JWTs of one account) that
// accepts TLS only, handshake first, so the gateway reaches it over TLS. Its users are
// proxy_required.
func startOperatorStack(t *testing.T) (*localstack.Stack, localstack.Ports) {
	t.Helper()
	work := t.TempDir()
	p, err := localstack.FreePorts()
	if err != nil {
		t.Fatal(err)
	}
	policies := filepath.Join(work, "policies")
	if err := localstack.CopyPolicies(filepath.Join(root, "policies"), policies); err != nil {
		t.Fatal(err)
	}
	s, err := localstack.Start(context.Background(), localstack.Config{
		ToolsDir: filepath.Join(root, ".tools"), WasmFile: filepath.Join(root, "wasm-filter/target/wasm32-wasip1/release/weighstation_filter.wasm"),
		PolicyDir: policies, WorkDir: work, Ports: p, EnvoyConcurrency: 1,
		NATSUpstreamTLS: true, NATSOperatorMode: true,
	})
	if err != nil {
		localstack.PrintLogTails(filepath.Join(work, "logs"))
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			localstack.PrintLogTails(s.LogDir())
		}
	})
	// The account's users are one tenant, limited to 20 messages/s.
	policy := fmt.Sprintf(`apiVersion: weighstation.io/v1alpha1
kind: LimitPolicy
metadata:
  name: jwt-account
spec:
  tenant: jwt-account
  identify:
    nats: { accounts: [%s] }
  onLimit: reject
  limits:
    rate: { messagesPerSecond: 20, burstMessages: 20 }
`, s.NATSAccount())
	if err := os.WriteFile(filepath.Join(policies, "jwt-account.yaml"), []byte(policy), 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the jwt-account policy is in force", func() bool {
		st, err := s.ControlPlaneStatus()
		return err == nil && st.Active != nil && strings.Contains(statusBody(t, p.ControlPlane), `"jwt-account"`) && s.WaitInSync(time.Second) == nil
	})
	return s, p
}

// statusBody is the control plane's /status.
func statusBody(t *testing.T, cpPort int) string {
	t.Helper()
	resp, err := http.Get("http://" + addr(cpPort) + "/status")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// userCreds writes a .creds file (JWT and seed) for a new user of the stack's account.
func userCreds(t *testing.T, s *localstack.Stack, name string) string {
	t.Helper()
	token, seed, err := s.IssueNATSUser(name, true)
	if err != nil {
		t.Fatal(err)
	}
	creds, err := jwt.FormatUserConfig(token, seed)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name+".creds")
	if err := os.WriteFile(path, creds, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// User JWTs through the gateway, TLS on both sides: attributed to their account's tenant and
// limited by its policy, from nats.go (TLS first and plaintext) and the nats CLI; the same user
// dialing nats-server directly is refused (proxy_required).
func TestNATSUserJWTBehindATLSOnlyServer(t *testing.T) {
	s, p := startOperatorStack(t)
	labels := map[string]string{"protocol": "nats", "tenant": "jwt-account"}
	accepted := func() float64 { v, _ := metricSeriesAt(t, p.Admin, "weighstation_messages_accepted", labels); return v }
	pool := certPool(t, filepath.Join(s.TLSDir(), "ca.crt"))
	tlsFirst := []nats.Option{nats.Secure(&tls.Config{RootCAs: pool}), nats.TLSHandshakeFirst(), nats.Timeout(5 * time.Second)}

	// The subscriber is a plaintext client of the gateway: its INFO must not ask it to upgrade,
	// though nats-server requires TLS of the gateway.
	sub, err := nats.Connect("nats://"+addr(p.NATS), nats.UserCredentials(userCreds(t, s, "subscriber")), nats.Timeout(5*time.Second))
	if err != nil {
		t.Fatalf("a plaintext client behind a TLS-only nats-server: %v", err)
	}
	defer sub.Close()
	got, err := sub.SubscribeSync("jwt.orders")
	if err != nil {
		t.Fatal(err)
	}
	_ = sub.Flush()

	pub, err := nats.Connect("tls://"+addr(p.NATSTLS), append(tlsFirst, nats.UserCredentials(userCreds(t, s, "publisher")))...)
	if err != nil {
		t.Fatalf("nats.go with a user JWT over TLS first: %v", err)
	}
	defer pub.Close()
	before := accepted()
	for range 10 {
		if err := pub.Publish("jwt.orders", []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	_ = pub.Flush()
	for i := range 10 {
		if _, err := got.NextMsg(5 * time.Second); err != nil {
			t.Fatalf("message %d of 10 not delivered: %v", i+1, err)
		}
	}
	if d := accepted() - before; d != 10 {
		t.Errorf("the account's tenant charged %.0f messages, want 10", d)
	}

	t.Run("nats CLI with creds", func(t *testing.T) {
		before := accepted()
		out, err := exec.Command(filepath.Join(root, ".tools/bin/nats"), "--server", "tls://"+addr(p.NATSTLS),
			"--tlsca", filepath.Join(s.TLSDir(), "ca.crt"), "--tlsfirst", "--creds", userCreds(t, s, "cli"),
			"pub", "jwt.cli", "hello", "--count", "3").CombinedOutput()
		if err != nil {
			t.Fatalf("nats pub: %v\n%s", err, out)
		}
		if d := accepted() - before; d != 3 {
			t.Errorf("charged %.0f messages, want 3\n%s", d, out)
		}
	})

	t.Run("limited by the account's policy", func(t *testing.T) {
		refused0, _ := metricSeriesAt(t, p.Admin, "weighstation_messages_refused", labels)
		for range 100 {
			_ = pub.Publish("jwt.burst", []byte("x"))
		}
		_ = pub.Flush()
		var refused float64
		eventually(t, 5*time.Second, "refusals counted", func() bool {
			_, total := metricSeriesAt(t, p.Admin, "weighstation_messages_refused", labels)
			refused = total - refused0
			return refused > 0
		})
		t.Logf("100 messages at once against 20/s: %.0f refused", refused)
		if !pub.IsConnected() {
			t.Error("a refusal closed the connection")
		}
	})

	t.Run("direct dial refused", func(t *testing.T) {
		bpool := certPool(t, filepath.Join(s.TLSDir(), "broker-ca.crt"))
		_, err := nats.Connect("tls://"+addr(p.NATSUpstream), nats.Secure(&tls.Config{RootCAs: bpool}), nats.TLSHandshakeFirst(),
			nats.UserCredentials(userCreds(t, s, "bypass")), nats.Timeout(5*time.Second))
		if err == nil || !strings.Contains(strings.ToLower(err.Error()), "authorization violation") {
			t.Errorf("a proxy_required user dialing nats-server directly: %v", err)
		}
	})
}
