package main

import (
	"archive/zip"
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// jarOf packs the class files javac wrote to dir into a jar, the same bytes for the same
// classes: entries in path order, every time modTime (the `jar` tool stamps the time it runs
// and lists files in the directory's order).
func jarOf(dir string, modTime time.Time) ([]byte, error) {
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			rel, err := filepath.Rel(dir, p)
			if err != nil {
				return err
			}
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// WalkDir visits in lexical order already; the manifest comes first, as java expects.
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	add := func(name string, data []byte) error {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Deflate, Modified: modTime.UTC()})
		if err != nil {
			return err
		}
		_, err = w.Write(data)
		return err
	}
	if err := add("META-INF/MANIFEST.MF", []byte("Manifest-Version: 1.0\r\nCreated-By: weighstation-image\r\n\r\n")); err != nil {
		return nil, err
	}
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(f)))
		if err != nil {
			return nil, err
		}
		if err := add(f, data); err != nil {
			return nil, err
		}
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
