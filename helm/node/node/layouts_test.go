package node

import (
	"archive/tar"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// An OCI layout is archived as its files are, at paths relative to the layout (what ctr import
// reads as an OCI archive): index.json and the blobs, byte for byte.
func TestTarDirKeepsTheLayoutsFiles(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{"index.json": `{"schemaVersion":2}`, "oci-layout": `{"imageLayoutVersion":"1.0.0"}`, "blobs/sha256/ab": "blob"}
	for name, body := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	archive := filepath.Join(t.TempDir(), "layout.tar")
	if err := tarDir(dir, archive); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got := map[string]string{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			b, _ := io.ReadAll(tr)
			got[h.Name] = string(b)
		}
	}
	for name, body := range files {
		if got[name] != body {
			t.Errorf("%s in the archive: %q, want %q", name, got[name], body)
		}
	}
	if len(got) != len(files) {
		t.Errorf("the archive holds %v", got)
	}
}
