package node

import (
	"archive/tar"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// importLayout imports the OCI layout of spec (LAYOUT=NAME) into containerd's k8s.io namespace:
// its references under the repository NAME (a tag from the layout's ref.name), and by digest,
// so that a chart pinning the image by digest finds it. ctr imports a tar stream, so the layout
// is archived as it is (OCI's own archive format: the layout's files) into dir first.
func importLayout(ctr, socket, dir, spec string) error {
	layout, name, ok := strings.Cut(spec, "=")
	if !ok {
		return fmt.Errorf("image %q: want LAYOUT=NAME", spec)
	}
	archive := filepath.Join(dir, strings.NewReplacer("/", "_", ":", "_").Replace(name)+".tar")
	if err := tarDir(layout, archive); err != nil {
		return err
	}
	defer os.Remove(archive)
	out, err := exec.Command(ctr, "--address", socket, "-n", "k8s.io", "images", "import", "--base-name", name, "--digests", archive).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ctr images import %s as %s: %v\n%s", layout, name, err, out)
	}
	return nil
}

// tarDir writes the files under dir (an OCI layout: directories and regular files) as a tar.
func tarDir(dir, to string) error {
	f, err := os.Create(to)
	if err != nil {
		return err
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		info, err := e.Info()
		if err != nil {
			return err
		}
		h, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		h.Name = filepath.ToSlash(rel)
		if err := tw.WriteHeader(h); err != nil || !info.Mode().IsRegular() {
			return err
		}
		src, err := os.Open(path)
		if err != nil {
			return err
		}
		defer src.Close()
		_, err = io.Copy(tw, src)
		return err
	})
	if err != nil {
		return err
	}
	return tw.Close()
}
