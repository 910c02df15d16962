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
	"github.com/google/go-containerregistry/pkg/v1/tarball"
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

// archiveTag is the one repository tag of a docker-archive, which must hold the layout's image
// (its config, the image ID, and its layers).
func archiveTag(t *testing.T, archive string, img v1.Image) string {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	var manifest []struct{ RepoTags []string }
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Name == "manifest.json" {
			if err := json.NewDecoder(tr).Decode(&manifest); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(manifest) != 1 || len(manifest[0].RepoTags) != 1 {
		t.Fatalf("%s: manifest.json %+v, want one image with one tag", archive, manifest)
	}
	archived, err := tarball.ImageFromPath(archive, nil)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := must(archived.ConfigName()), must(img.ConfigName()); a != b {
		t.Errorf("%s holds image %s, the layout %s", archive, a, b)
	}
	la, lb := must(archived.Layers()), must(img.Layers())
	for i := range max(len(la), len(lb)) {
		if i >= len(la) || i >= len(lb) || must(la[i].Digest()) != must(lb[i].Digest()) {
			t.Errorf("%s: its layers are not the layout's", archive)
			break
		}
	}
	return manifest[0].RepoTags[0]
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
