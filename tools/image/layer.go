package main

import (
	"bytes"
	"compress/gzip"
	"io"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// part is one layer of a node image and what its history says it is.
type part struct {
	layer   v1.Layer
	comment string
}

// compressedLayer writes the entries as a tar (writeTar: fixed headers, the given mtime) and
// compresses it once, here: go-containerregistry, given an uncompressed tar, compresses it again
// for the digest, the layout and the archive, which for the JRE is seconds each. gzip's header
// carries no name and no time, so the same entries give the same bytes, the same digest.
// BestSpeed is the level go-containerregistry itself uses.
func compressedLayer(entries []entry, modTime time.Time) (v1.Layer, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	if err != nil {
		return nil, err
	}
	if err := writeTar(zw, entries, modTime); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	// go-containerregistry sees the gzip magic and takes the bytes as the compressed layer.
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil },
		tarball.WithMediaType(types.OCILayer))
}
