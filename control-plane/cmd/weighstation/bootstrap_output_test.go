package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The chart's init container has no shell to redirect stdout, so `--output` must write the
// same document `bootstrap` prints.
func TestBootstrapOutputWritesWhatStdoutWouldShow(t *testing.T) {
	args := []string{"--node-id", "pod-1", "--xds", "cp.ns.svc:18000", "--metrics", "0.0.0.0:9102"}
	var stdout, stderr bytes.Buffer
	if code := bootstrapCmd(args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	path := filepath.Join(t.TempDir(), "bootstrap.json")
	var out2 bytes.Buffer
	if code := bootstrapCmd(append(args, "--output", path), &out2, &stderr); code != 0 || out2.Len() != 0 {
		t.Fatalf("exit %d, stdout %q: %s", code, out2.String(), stderr.String())
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, stdout.Bytes()) || !json.Valid(got) {
		t.Errorf("--output wrote %d bytes, stdout had %d", len(got), stdout.Len())
	}
	stderr.Reset()
	if code := bootstrapCmd(append(args, "--output", filepath.Join(path, "nodir", "x.json")), &out2, &stderr); code != 1 || !strings.Contains(stderr.String(), "weighstation bootstrap:") {
		t.Errorf("unwritable --output: exit %d, stderr %q", code, stderr.String())
	}
}
