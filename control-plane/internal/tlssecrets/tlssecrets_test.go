package tlssecrets

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

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
