package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// tree lists one layer of a node image: paths (relative, no leading slash) to entries, each
// file's parent directories added with it so that the layer unpacks the same on any runtime.
// Paths a lower layer already carries are left out: the libraries the JRE layer brought are not
// carried again by the layer of bash above it, and a directory a lower layer made (/tmp, 1777)
// keeps its mode.
type tree struct {
	entries map[string]entry
	lower   []*tree
}

func newTree(lower ...*tree) *tree {
	return &tree{entries: map[string]entry{}, lower: lower}
}

// has says whether this layer or one below carries p.
func (t *tree) has(p string) bool {
	if _, ok := t.entries[p]; ok {
		return true
	}
	for _, l := range t.lower {
		if l.has(p) {
			return true
		}
	}
	return false
}

// dir adds a directory, and its parents as root's 0755 ones.
func (t *tree) dir(p string, mode int64, uid int, owner string) {
	p = clean(p)
	if p == "" || t.has(p) {
		return
	}
	t.dir(path.Dir(p), 0o755, 0, "")
	t.entries[p] = entry{path: p, dir: true, mode: mode, uid: uid, owner: owner}
}

// file adds a root-owned file with the given contents.
func (t *tree) file(p string, mode int64, data []byte) {
	p = clean(p)
	t.dir(path.Dir(p), 0o755, 0, "")
	t.entries[p] = entry{path: p, mode: mode, data: data}
}

// host adds the file at src on this machine as p, following symbolic links to the file they
// name: the images hold regular files and directories only. Its mode is 0755 if the source is
// executable by anyone, else 0644, whatever the machine's umask made it.
func (t *tree) host(p, src string) error {
	p = clean(p)
	if t.has(p) {
		return nil
	}
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", src)
	}
	mode := int64(0o644)
	if fi.Mode().Perm()&0o111 != 0 {
		mode = 0o755
	}
	t.dir(path.Dir(p), 0o755, 0, "")
	t.entries[p] = entry{path: p, mode: mode, src: src}
	return nil
}

// hostDir adds the directory src as p, recursively, following symbolic links (to files and to
// directories); skip names the paths under src to leave out (slash-separated, relative).
func (t *tree) hostDir(p, src string, skip func(rel string) bool) error {
	var walk func(rel string) error
	walk = func(rel string) error {
		names, err := os.ReadDir(filepath.Join(src, rel))
		if err != nil {
			return err
		}
		t.dir(path.Join(p, rel), 0o755, 0, "")
		for _, n := range names {
			r := path.Join(rel, n.Name())
			if skip != nil && skip(r) {
				continue
			}
			fi, err := os.Stat(filepath.Join(src, r))
			if err != nil {
				return fmt.Errorf("%s: %w", filepath.Join(src, r), err)
			}
			if fi.IsDir() {
				err = walk(r)
			} else {
				err = t.host(path.Join(p, r), filepath.Join(src, r))
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
	return walk("")
}

// list is the layer's entries in path order, a directory before what it holds.
func (t *tree) list() []entry {
	out := make([]entry, 0, len(t.entries))
	for _, e := range t.entries {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].path < out[j].path })
	return out
}

// elfs are the machine's files this layer carries that are ELF objects (programs and shared
// libraries), whose libraries the image must carry too.
func (t *tree) elfs() ([]string, error) {
	var out []string
	for _, e := range t.list() {
		if e.src == "" {
			continue
		}
		ok, err := isELF(e.src)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, e.src)
		}
	}
	return out, nil
}

// withLibraries adds the shared libraries and the loader the layer's ELF objects need, at the
// paths ldd finds them on this machine (where the loader looks for them in the image too).
// env is added to ldd's environment (the JRE's LD_LIBRARY_PATH).
func (t *tree) withLibraries(env ...string) error {
	elfs, err := t.elfs()
	if err != nil {
		return err
	}
	libs, err := libraries(env, elfs...)
	if err != nil {
		return err
	}
	for _, l := range libs {
		if err := t.host(l, l); err != nil {
			return err
		}
	}
	return nil
}

func isELF(p string) (bool, error) {
	f, err := os.Open(p)
	if err != nil {
		return false, err
	}
	defer f.Close()
	magic := make([]byte, 4)
	if _, err := io.ReadFull(f, magic); err != nil {
		return false, nil
	}
	return bytes.Equal(magic, []byte("\x7fELF")), nil
}

// clean makes p relative to the image's root: no leading slash, no dot segments.
func clean(p string) string {
	p = strings.TrimPrefix(path.Clean("/"+p), "/")
	return p
}
