package tlssecrets

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weighstation/weighstation/control-plane/internal/devcerts"
)

// A file that does not load is an error naming it; the version changes with any file's content.
func TestLoadChecksTheFilesAndVersionsTheirContent(t *testing.T) {
	ca, err := devcerts.NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := func(name string) string { return filepath.Join(dir, name) }
	one, _ := ca.Server("one", "localhost")
	two, _ := ca.Server("two", "localhost")
	if err := one.Write(dir, "one"); err != nil {
		t.Fatal(err)
	}
	if err := two.Write(dir, "two"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path("ca.crt"), ca.PEM, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path("empty.crt"), []byte("not a certificate\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	good := Files{CertFile: path("one.crt"), KeyFile: path("one.key"), ClientCAFile: path("ca.crt")}
	cases := []struct {
		name  string
		files Files
		want  string
	}{
		{"matching pair and CA", good, ""},
		{"key of another certificate", Files{CertFile: path("one.crt"), KeyFile: path("two.key")}, path("one.crt") + " with " + path("two.key")},
		{"CA file without a certificate", Files{CertFile: path("one.crt"), KeyFile: path("one.key"), ClientCAFile: path("empty.crt")}, path("empty.crt") + ": no PEM certificate"},
		{"missing file", Files{CertFile: path("nope.crt"), KeyFile: path("one.key")}, "nope.crt"},
		{"client CA without a server certificate", Files{ClientCAFile: path("ca.crt")}, "--tls-client-ca-file needs --tls-cert-file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := c.files.Load()
			if c.want == "" {
				if err != nil || len(m.Secrets()) != 2 || m.NotAfter.IsZero() {
					t.Fatalf("Load: %v, %v", m, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
		})
	}
	before, err := good.Load()
	if err != nil {
		t.Fatal(err)
	}
	if err := two.Write(dir, "one"); err != nil {
		t.Fatal(err)
	}
	after, err := good.Load()
	if err != nil {
		t.Fatal(err)
	}
	if before.Version == after.Version {
		t.Errorf("a rotated certificate kept version %s", before.Version)
	}
}

// A rotation that does not load (a key that is not its certificate's) keeps the previous
// version in force and reports why; the next good set takes over.
func TestWatcherKeepsTheLastGoodVersion(t *testing.T) {
	ca, err := devcerts.NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	first, _ := ca.Server("first", "localhost")
	if err := first.Write(dir, "gw"); err != nil {
		t.Fatal(err)
	}
	files := Files{CertFile: filepath.Join(dir, "gw.crt"), KeyFile: filepath.Join(dir, "gw.key")}
	m, err := files.Load()
	if err != nil {
		t.Fatal(err)
	}
	w := NewWatcher(files, m)
	changes := make(chan *Material, 4)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go w.Run(ctx, 5*time.Millisecond, func(m *Material) { changes <- m }, slog.New(slog.NewTextHandler(io.Discard, nil)))

	second, _ := ca.Server("second", "localhost")
	if err := devcerts.WriteAtomic(files.KeyFile, second.KeyPEM, 0o600); err != nil { // the certificate lags
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for w.Standing().Error == "" && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if st := w.Standing(); st.Error == "" || st.Version != m.Version {
		t.Fatalf("a key without its certificate: %+v", st)
	}
	if err := devcerts.WriteAtomic(files.CertFile, second.CertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case next := <-changes:
		if st := w.Standing(); st.Error != "" || st.Version != next.Version || next.Version == m.Version ||
			!st.ServerCertificateNotAfter.Equal(second.Cert.NotAfter) {
			t.Errorf("after the certificate followed: %+v", st)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the completed rotation was not published")
	}
}
