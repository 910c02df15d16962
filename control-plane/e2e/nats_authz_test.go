package e2e

import (
	"crypto/x509/pkix"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// What a NATS tenant may publish and subscribe to, decided at the gateway for a client known by
// its certificate alone (nats-server sees the gateway's proxy user, so only the gateway can
// tell): nats.go and the nats CLI on permitted and forbidden subjects, and a JetStream stream
// it may not delete. Deliveries are checked by a subscriber of nats-server's own.
func TestNATSPermissionsForACertificateIdentifiedClient(t *testing.T) {
	if err := stack.IssueClientCertificate("cert-scoped", pkix.Name{CommonName: "cert-scoped", Organization: []string{"weighstation-e2e"}}, ""); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var asyncErrs []string
	errSeen := func(want string) bool {
		mu.Lock()
		defer mu.Unlock()
		for _, e := range asyncErrs {
			if strings.Contains(e, want) {
				return true
			}
		}
		return false
	}
	nc, err := nats.Connect("tls://"+addr(ports.NATSTLS), nats.Secure(clientTLS(t, "cert-scoped")), nats.TLSHandshakeFirst(),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			mu.Lock()
			defer mu.Unlock()
			asyncErrs = append(asyncErrs, err.Error())
		}))
	if err != nil {
		t.Fatalf("nats.go with cert-scoped's certificate: %v", err)
	}
	defer nc.Close()
	direct := directNATS(t)
	// nats-server's own view of each subject the client is to publish to.
	watch := func(subject string) *nats.Subscription {
		t.Helper()
		sub, err := direct.SubscribeSync(subject)
		if err != nil {
			t.Fatal(err)
		}
		return sub
	}
	seen, other, cliSeen, cliOther := watch("scoped.ok"), watch("other.x"), watch("scoped.cli"), watch("other.cli")
	_ = direct.Flush()

	// Publishing: its own subjects go through; another's is refused, in nats-server's words,
	// and the connection stays.
	if err := nc.Publish("scoped.ok", []byte("1")); err != nil {
		t.Fatal(err)
	}
	if m, err := seen.NextMsg(5 * time.Second); err != nil || m.Subject != "scoped.ok" {
		t.Errorf("a publish to its own subject: %v %v", m, err)
	}
	if err := nc.Publish("other.x", []byte("2")); err != nil {
		t.Fatal(err)
	}
	_ = nc.Flush()
	eventually(t, 5*time.Second, `the client hears "Permissions Violation for Publish to "other.x""`, func() bool {
		return errSeen(`Permissions Violation for Publish to "other.x"`)
	})
	if m, err := other.NextMsg(500 * time.Millisecond); err == nil {
		t.Errorf("a refused publish reached nats-server: %s", m.Subject)
	}

	// Subscribing: to another's subjects is refused; to its own, delivered.
	forbidden, err := nc.SubscribeSync("other.>")
	if err != nil {
		t.Fatal(err)
	}
	own, err := nc.SubscribeSync("scoped.in")
	if err != nil {
		t.Fatal(err)
	}
	_ = nc.Flush()
	eventually(t, 5*time.Second, `the client hears "Permissions Violation for Subscription to "other.>""`, func() bool {
		return errSeen(`Permissions Violation for Subscription to "other.>"`)
	})
	_ = direct.Publish("other.y", []byte("3"))
	_ = direct.Publish("scoped.in", []byte("4"))
	_ = direct.Flush()
	if m, err := own.NextMsg(5 * time.Second); err != nil || string(m.Data) != "4" {
		t.Errorf("its own subscription: %v %v", m, err)
	}
	if m, err := forbidden.NextMsg(500 * time.Millisecond); err == nil {
		t.Errorf("a refused subscription was given %s", m.Subject)
	}

	// JetStream: a stream it may not administer is not deleted.
	admin, err := direct.JetStream()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.AddStream(&nats.StreamConfig{Name: "SCOPED_GUARDED", Subjects: []string{"scoped.guarded"}, Storage: nats.MemoryStorage}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.DeleteStream("SCOPED_GUARDED") })
	js, err := nc.JetStream(nats.MaxWait(3 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteStream("SCOPED_GUARDED"); err == nil {
		t.Error("deleting a stream through the gateway without jetStreamAdmin succeeded")
	}
	if _, err := admin.StreamInfo("SCOPED_GUARDED"); err != nil {
		t.Errorf("the stream is gone: %v", err)
	}
	eventually(t, 5*time.Second, "the client hears the refusal of the stream's deletion", func() bool {
		return errSeen(`Permissions Violation for Publish to "$JS.API.STREAM.DELETE.SCOPED_GUARDED"`)
	})
	if !nc.IsConnected() {
		t.Error("the refusals closed the connection")
	}

	// The nats CLI, with the same certificate.
	out, _ := exec.Command(filepath.Join(root, ".tools/bin/nats"), "--server", "tls://"+addr(ports.NATSTLS),
		"--tlsca", tlsFile("ca.crt"), "--tlscert", tlsFile("cert-scoped.crt"), "--tlskey", tlsFile("cert-scoped.key"), "--tlsfirst",
		"request", "other.cli", "hello", "--timeout", "2s").CombinedOutput()
	// natscli says "nats: no responders available for request" or, in some versions and races,
	// "No responders are available": the request reached no subscriber either way.
	if !strings.Contains(strings.ToLower(string(out)), "no responders") && !strings.Contains(string(out), "Permissions Violation") {
		t.Errorf("nats request to a forbidden subject: want a refusal, got:\n%s", out)
	}
	if m, err := cliOther.NextMsg(500 * time.Millisecond); err == nil {
		t.Errorf("the CLI's refused request reached nats-server: %s", m.Subject)
	}
	out, err = exec.Command(filepath.Join(root, ".tools/bin/nats"), "--server", "tls://"+addr(ports.NATSTLS),
		"--tlsca", tlsFile("ca.crt"), "--tlscert", tlsFile("cert-scoped.crt"), "--tlskey", tlsFile("cert-scoped.key"), "--tlsfirst",
		"pub", "scoped.cli", "hello").CombinedOutput()
	if err != nil {
		t.Errorf("nats pub to its own subject: %v\n%s", err, out)
	}
	if m, err := cliSeen.NextMsg(5 * time.Second); err != nil || m.Subject != "scoped.cli" {
		t.Errorf("the CLI's publish to its own subject: %v %v", m, err)
	}
}
