package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// env is what `make test-image` hands the test: the image it built and the outputs it built
// it from.
func env(t *testing.T, name string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		t.Fatalf("%s is not set: run the test with make test-image", name)
	}
	return v
}

// built is the image `make image` wrote, read back from its OCI layout.
func built(t *testing.T) v1.Image {
	t.Helper()
	img, err := imageIn(filepath.Join(env(t, "IMAGE_DIR"), "oci"))
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// files lists the image's flattened filesystem: path → regular file contents (nil for a
// directory), and each entry's header.
func files(t *testing.T, img v1.Image) (map[string][]byte, map[string]*tar.Header) {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	data, headers := map[string][]byte{}, map[string]*tar.Header{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return data, headers
		}
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimSuffix(h.Name, "/")
		headers[name] = h
		if h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			data[name] = b
		} else {
			data[name] = nil
		}
	}
}

// The image's config says how the chart runs it: the binary as entrypoint, serving the filter
// module, as uid 65532, with the OCI labels naming the commit.
func TestImageConfig(t *testing.T) {
	img := built(t)
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if !slices.Equal(c.Entrypoint, []string{"/usr/local/bin/weighstation"}) {
		t.Errorf("entrypoint %q", c.Entrypoint)
	}
	if len(c.Cmd) == 0 || c.Cmd[0] != "serve" || !slices.Contains(c.Cmd, "--serve-wasm=/usr/share/weighstation/weighstation_filter.wasm") {
		t.Errorf("default arguments %q: want serve, serving the filter module", c.Cmd)
	}
	if c.User != "65532:65532" {
		t.Errorf("user %q, want 65532:65532", c.User)
	}
	revision, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	for label, want := range map[string]string{
		"org.opencontainers.image.title":    "weighstation",
		"org.opencontainers.image.revision": strings.TrimSpace(string(revision)),
		"org.opencontainers.image.licenses": "Apache-2.0",
	} {
		if c.Labels[label] != want {
			t.Errorf("label %s = %q, want %q", label, c.Labels[label], want)
		}
	}
	if cf.OS != "linux" || cf.Architecture == "" || cf.Created.IsZero() {
		t.Errorf("os %q, architecture %q, created %v", cf.OS, cf.Architecture, cf.Created)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("image %s: %d layer(s), created %s, revision %s", must(img.Digest()), len(m.Layers), cf.Created.UTC(), c.Labels["org.opencontainers.image.revision"])
}

// The image carries the build outputs byte for byte, owned by root and not writable by the
// user it runs as, and nothing to run but them: no shell, no other executable.
func TestImageCarriesTheBuildOutputsAndNoShell(t *testing.T) {
	data, headers := files(t, built(t))
	for p, src := range map[string]string{
		binaryPath: env(t, "IMAGE_BINARY"), filterPath: env(t, "WASM"), impactPath: env(t, "IMPACT_WASM"), caPath: env(t, "IMAGE_CA_BUNDLE"),
	} {
		want, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(data[p], want) {
			t.Errorf("/%s is not %s (%d bytes, want %d)", p, src, len(data[p]), len(want))
		}
		if h := headers[p]; h == nil || h.Uid != 0 || h.Mode&0o022 != 0 {
			t.Errorf("/%s: owner or mode lets uid %d change it: %+v", p, nonroot, h)
		}
	}
	for p, h := range headers {
		dir := path.Dir(p)
		if slices.Contains([]string{"bin", "sbin", "usr/bin", "usr/sbin"}, dir) ||
			slices.Contains([]string{"sh", "bash", "ash", "dash", "busybox"}, path.Base(p)) {
			t.Errorf("/%s: the image has no shell and no other program", p)
		}
		if h.Typeflag == tar.TypeReg && h.Mode&0o111 != 0 && p != binaryPath {
			t.Errorf("/%s is executable; only the weighstation binary may be", p)
		}
		if h.Typeflag != tar.TypeReg && h.Typeflag != tar.TypeDir {
			t.Errorf("/%s: type %q (links and devices have no place in it)", p, h.Typeflag)
		}
	}
	if !strings.Contains(string(data["etc/passwd"]), "nonroot:x:65532:65532:") {
		t.Errorf("/etc/passwd names no nonroot user 65532:\n%s", data["etc/passwd"])
	}
}

// Two builds of one commit are one image: built again, in a new process, from the same
// outputs, the digest is the one `make image` printed.
func TestImageBuildIsReproducible(t *testing.T) {
	dir := env(t, "IMAGE_DIR")
	want, err := os.ReadFile(filepath.Join(dir, "digest"))
	if err != nil {
		t.Fatal(err)
	}
	again := t.TempDir()
	created, err := exec.Command("git", "log", "-1", "--format=%ct").Output()
	if err != nil {
		t.Fatal(err)
	}
	revision, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("go", "run", ".", "build", "--binary", env(t, "IMAGE_BINARY"), "--filter", env(t, "WASM"),
		"--impact", env(t, "IMPACT_WASM"), "--ca-bundle", env(t, "IMAGE_CA_BUNDLE"), "--revision", strings.TrimSpace(string(revision)),
		"--created", strings.TrimSpace(string(created)), "--version", "dev", "--out", again).CombinedOutput()
	if err != nil {
		t.Fatalf("building again: %v\n%s", err, out)
	}
	got, err := os.ReadFile(filepath.Join(again, "digest"))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatalf("built again: %s; make image built %s", strings.TrimSpace(string(got)), strings.TrimSpace(string(want)))
	}
	t.Logf("built twice: %s", strings.TrimSpace(string(got)))
}

// The docker-archive is the same image (`docker load` and `podman load` read it): its config,
// the image ID, is the layout's.
func TestDockerArchiveIsTheSameImage(t *testing.T) {
	img := built(t)
	archived, err := tarball.ImageFromPath(filepath.Join(env(t, "IMAGE_DIR"), "weighstation.tar"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := must(archived.ConfigName()), must(img.ConfigName()); a != b {
		t.Fatalf("the docker-archive's image ID is %s, the layout's %s", a, b)
	}
	la, lb := must(archived.Layers()), must(img.Layers())
	if len(la) != len(lb) || must(la[0].DiffID()) != must(lb[0].DiffID()) {
		t.Fatal("the docker-archive's layers are not the layout's")
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
