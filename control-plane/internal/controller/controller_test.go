package controller

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/weighstation/weighstation/control-plane/internal/policy"
)

type recordingPublisher struct{ versions []string }

func (p *recordingPublisher) Publish(_ *policy.Set, version string) error {
	p.versions = append(p.versions, version)
	return nil
}

const defaultsDoc = `apiVersion: weighstation.io/v1alpha1
kind: GatewayDefaults
metadata: { name: defaults }
spec:
  defaultTenant: anonymous
---
apiVersion: weighstation.io/v1alpha1
kind: LimitPolicy
metadata: { name: anonymous }
spec:
  tenant: anonymous
`

func acme(inFlight string) string {
	return `apiVersion: weighstation.io/v1alpha1
kind: LimitPolicy
metadata: { name: acme }
spec:
  tenant: acme
  identify: { nats: { users: [acme] } }
  limits: { inFlight: ` + inFlight + ` }
`
}

// Each reload of the directory: a valid change is published once, however often the poll
// reloads it; an invalid one is refused naming its file and line, the last good version stays
// in force, and set right it is published.
func TestReloadPublishesValidChangesAndKeepsTheLastGoodOne(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.yaml", defaultsDoc)
	write("b.yaml", acme("5"))
	pub := &recordingPublisher{}
	c := New(dir, pub, slog.New(slog.NewTextHandler(io.Discard, nil)))
	steps := []struct {
		name      string
		change    func()
		published int
		errorAt   string // lastError's file:line, "" for none
	}{
		{"first load", func() {}, 1, ""},
		{"nothing changed", func() {}, 1, ""},
		{"a valid change", func() { write("b.yaml", acme("6")) }, 2, ""},
		{"an invalid change", func() { write("b.yaml", acme("x")) }, 2, "b.yaml:7"},
		{"the invalid change again", func() {}, 2, "b.yaml:7"},
		{"set right", func() { write("b.yaml", acme("7")) }, 3, ""},
		{"the file removed", func() { _ = os.Remove(filepath.Join(dir, "b.yaml")) }, 4, ""},
	}
	for _, s := range steps {
		s.change()
		_ = c.Reload()
		st := c.State()
		if len(pub.versions) != s.published {
			t.Fatalf("%s: %d versions published, want %d", s.name, len(pub.versions), s.published)
		}
		if st.Active == nil || st.Active.Version != pub.versions[len(pub.versions)-1] {
			t.Errorf("%s: active %+v, want the last published, %s", s.name, st.Active, pub.versions[len(pub.versions)-1])
		}
		errorAt := ""
		if st.LastError != nil {
			errorAt = filepath.Base(st.LastError.File) + ":" + strconv.Itoa(st.LastError.Line)
		}
		if errorAt != s.errorAt {
			t.Errorf("%s: last error at %q, want %q (%+v)", s.name, errorAt, s.errorAt, st.LastError)
		}
	}
	if tenants := c.State().Active.Tenants; len(tenants) != 1 || tenants[0] != "anonymous" {
		t.Errorf("tenants after acme's file was removed: %v", tenants)
	}
}

// A version is numbered past any a gateway said it runs: two replicas, one restarted (counting
// from 1), number the next change alike once they have heard from the same gateways; a version
// that is not "<generation>-<hash>", absurdly high, or of a content this replica never
// published is ignored.
func TestVersionsAreNumberedPastTheGatewaysOwn(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.yaml"), []byte(defaultsDoc+"---\n"+acme("5")), 0o644); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	long, restarted := &recordingPublisher{}, &recordingPublisher{}
	a, b := New(dir, long, log), New(dir, restarted, log)
	a.generation = 5 // as if five changes had been published before b restarted
	_ = a.Reload()
	_ = b.Reload()
	if g := a.State().Generation; g != 6 || b.State().Generation != 1 {
		t.Fatalf("generations %d and %d before any gateway was heard", g, b.State().Generation)
	}
	for _, v := range []string{a.ActiveVersion(), "x-abc", "9999999999999999999-abc", "", "8", "4503599627370495-" + b.ActiveVersion()[2:] + "0", "4503599627370495-abc"} {
		b.Witness(v)
	}
	if err := os.WriteFile(filepath.Join(dir, "a.yaml"), []byte(defaultsDoc+"---\n"+acme("6")), 0o644); err != nil {
		t.Fatal(err)
	}
	_ = a.Reload()
	_ = b.Reload()
	if va, vb := a.ActiveVersion(), b.ActiveVersion(); va != vb || !strings.HasPrefix(va, "7-") {
		t.Errorf("the same change numbered %s and %s, want both 7-…", va, vb)
	}
}
