package main

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// unpack writes the image's flattened filesystem into to (emptied first): directories and
// regular files with their modes (the sticky bit of /tmp too, whatever the umask) and, when run
// as root, their owners, so that a program run there with chroot as the image's user can write
// where it could in a container; the image has no links or devices, and any would be an error.
func unpack(img v1.Image, to string) error {
	if err := os.RemoveAll(to); err != nil {
		return err
	}
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	// Directories get their own modes and owners last, so that one the image's user may not
	// write is still written into as it is filled.
	var dirs []*tar.Header
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			for _, d := range dirs {
				if err := own(filepath.Join(to, filepath.FromSlash(d.Name)), d); err != nil {
					return err
				}
			}
			return nil
		}
		if err != nil {
			return err
		}
		path := filepath.Join(to, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(path, filepath.Clean(to)+string(os.PathSeparator)) {
			return fmt.Errorf("%q is outside the root", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(path, os.FileMode(h.Mode).Perm()|0o700); err != nil {
				return err
			}
			dirs = append(dirs, h)
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				return err
			}
			f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode).Perm())
			if err != nil {
				return err
			}
			if _, err := io.Copy(f, tr); err != nil {
				f.Close()
				return err
			}
			if err := f.Close(); err != nil {
				return err
			}
			if err := own(path, h); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%q: entry type %q is not one the image has", h.Name, h.Typeflag)
		}
	}
}

// own gives path the header's mode, whatever the umask took from it, and, when run as root, its
// owner.
func own(path string, h *tar.Header) error {
	if err := os.Chmod(path, tarMode(h.Mode)); err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return nil
	}
	return os.Lchown(path, h.Uid, h.Gid)
}

// tarMode is a tar header's mode as Go's: the permissions and the setuid, setgid and sticky
// bits, which os.FileMode keeps elsewhere.
func tarMode(mode int64) os.FileMode {
	m := os.FileMode(mode).Perm()
	if mode&0o4000 != 0 {
		m |= os.ModeSetuid
	}
	if mode&0o2000 != 0 {
		m |= os.ModeSetgid
	}
	if mode&0o1000 != 0 {
		m |= os.ModeSticky
	}
	return m
}
