//go:build nodeimages

package main

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// chrootRun runs args in root as user ("uid:gid") with env, in a PID namespace with its own
// /proc, as a container has: the JRE finds its home ($ORIGIN) through /proc/self/exe.
func chrootRun(t *testing.T, root, user string, env []string, args ...string) (string, error) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(root, "proc"), 0o555); err != nil {
		t.Fatal(err)
	}
	// unshare finds chroot with the image's PATH, so it is named in full.
	chroot, err := exec.LookPath("chroot")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("unshare", append([]string{"--fork", "--pid", "--mount", "--mount-proc=" + filepath.Join(root, "proc"),
		chroot, "--userspec=" + user, root}, args...)...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// headers lists the image's flattened filesystem's entries, without their contents.
func headers(t *testing.T, img v1.Image) map[string]*tar.Header {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	hs := map[string]*tar.Header{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return hs
		}
		if err != nil {
			t.Fatal(err)
		}
		hs[strings.TrimSuffix(h.Name, "/")] = h
	}
}

// layoutName is the name (io.containerd.image.name) and ref (org.opencontainers.image.ref.name)
// the OCI layout's one image has: what the node imports it under.
func layoutName(t *testing.T, layout string) (name, ref string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(layout, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	var index struct {
		Manifests []struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"manifests"`
	}
	if err := json.Unmarshal(b, &index); err != nil || len(index.Manifests) != 1 {
		t.Fatalf("%s/index.json: %v, %d manifests, want one", layout, err, len(index.Manifests))
	}
	a := index.Manifests[0].Annotations
	return a["io.containerd.image.name"], a["org.opencontainers.image.ref.name"]
}

func envOf(cf *v1.ConfigFile, key string) string {
	for _, e := range cf.Config.Env {
		if v, ok := strings.CutPrefix(e, key+"="); ok {
			return v
		}
	}
	return ""
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
