package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"sort"
	"time"
)

// Where the image puts what it carries: the paths control-plane's chart runs (the binary as the
// entrypoint, the filter module at --serve-wasm, the impact module beside the binary).
const (
	binaryPath = "usr/local/bin/weighstation"
	impactPath = "usr/local/bin/weighstation_impact.wasm"
	filterPath = "usr/share/weighstation/weighstation_filter.wasm"
	caPath     = "etc/ssl/certs/ca-certificates.crt"
)

// nonroot is the user the image runs as, as distroless images and the chart's securityContext
// name it.
const nonroot = 65532

// entry is one file or directory of the root filesystem.
type entry struct {
	path string
	mode int64
	dir  bool
	uid  int
	data []byte
	// src is a file on this machine whose contents the entry carries instead of data, read
	// only while the layer is written: the node images carry a JRE of some 200 MB.
	src string
	// owner names uid in the tar header; empty is root (or nonroot for uid 65532).
	owner string
}

// Inputs are the build outputs the image carries.
type Inputs struct {
	Binary, Filter, Impact string
	// CABundle is the CA certificates the control plane trusts for its own outbound TLS (an OTLP
	// collector, the quota service's store); empty leaves them out.
	CABundle string
}

// rootfs lists the image's files: the three build outputs, the users (root and nonroot, no
// shell), nonroot's home, /tmp, and the CA bundle. Nothing else: no shell, no package manager.
func rootfs(in Inputs) ([]entry, error) {
	read := func(path string) ([]byte, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("reading a build output: %w", err)
		}
		return b, nil
	}
	binary, err := read(in.Binary)
	if err != nil {
		return nil, err
	}
	filter, err := read(in.Filter)
	if err != nil {
		return nil, err
	}
	impact, err := read(in.Impact)
	if err != nil {
		return nil, err
	}
	entries := []entry{
		{path: "etc", dir: true, mode: 0o755},
		{path: "etc/passwd", mode: 0o644, data: []byte(fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", nonroot, nonroot))},
		{path: "etc/group", mode: 0o644, data: []byte(fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", nonroot))},
		{path: "home", dir: true, mode: 0o755},
		{path: "home/nonroot", dir: true, mode: 0o700, uid: nonroot},
		{path: "tmp", dir: true, mode: 0o1777},
		{path: "usr", dir: true, mode: 0o755},
		{path: "usr/local", dir: true, mode: 0o755},
		{path: "usr/local/bin", dir: true, mode: 0o755},
		{path: binaryPath, mode: 0o755, data: binary},
		{path: impactPath, mode: 0o644, data: impact},
		{path: "usr/share", dir: true, mode: 0o755},
		{path: "usr/share/weighstation", dir: true, mode: 0o755},
		{path: filterPath, mode: 0o644, data: filter},
	}
	if in.CABundle != "" {
		ca, err := read(in.CABundle)
		if err != nil {
			return nil, err
		}
		entries = append(entries,
			entry{path: "etc/ssl", dir: true, mode: 0o755},
			entry{path: "etc/ssl/certs", dir: true, mode: 0o755},
			entry{path: caPath, mode: 0o644, data: ca})
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].path < entries[j].path })
	return entries, nil
}

// layerTar writes the entries as one tar with every header fixed but for what the entry says
// (owner, mode, size, and modTime, the commit's time): the same inputs give the same bytes.
func layerTar(entries []entry, modTime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	if err := writeTar(&buf, entries, modTime); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// writeTar is layerTar writing to w, so that a large layer can be compressed as it is written.
func writeTar(w io.Writer, entries []entry, modTime time.Time) error {
	tw := tar.NewWriter(w)
	for _, e := range entries {
		h := &tar.Header{Name: e.path, Mode: e.mode, Uid: e.uid, Gid: e.uid, ModTime: modTime, Format: tar.FormatPAX}
		switch {
		case e.owner != "":
			h.Uname, h.Gname = e.owner, e.owner
		case e.uid == nonroot:
			h.Uname, h.Gname = "nonroot", "nonroot"
		default:
			h.Uname, h.Gname = "root", "root"
		}
		data := e.data
		if e.src != "" {
			b, err := os.ReadFile(e.src)
			if err != nil {
				return err
			}
			data = b
		}
		if e.dir {
			h.Typeflag, h.Name = tar.TypeDir, e.path+"/"
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return err
		}
	}
	return tw.Close()
}
