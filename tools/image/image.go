package main

import (
	"bytes"
	"io"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Meta is what the image says about itself. Created is the commit's time, so that two builds
// of one commit are the same image.
type Meta struct {
	Revision, Version, Source string
	Created                   time.Time
	Arch                      string
}

// entrypoint and defaultArgs are what the container runs: `weighstation serve`, serving the
// filter module to Envoy, as the chart runs it (the chart passes its own arguments).
var (
	entrypoint  = []string{"/" + binaryPath}
	defaultArgs = []string{"serve", "--serve-wasm=/" + filterPath, "--policy-dir=/etc/weighstation/policies",
		"--xds-listen=:18000", "--http-listen=:18080"}
)

// Build assembles the image from the build outputs, from nothing (no base image): one layer
// and an OCI config. The same inputs and Meta give the same digest.
func Build(in Inputs, meta Meta) (v1.Image, error) {
	entries, err := rootfs(in)
	if err != nil {
		return nil, err
	}
	data, err := layerTar(entries, meta.Created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil },
		tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{Layer: layer, History: v1.History{
		Created: v1.Time{Time: meta.Created}, CreatedBy: "weighstation-image (make image)",
		Comment: "the weighstation binary, the filter and impact modules, users, CA certificates",
	}})
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.Architecture, cfg.OS = meta.Arch, "linux"
	cfg.Created = v1.Time{Time: meta.Created}
	cfg.Config = v1.Config{
		Entrypoint:   entrypoint,
		Cmd:          defaultArgs,
		User:         "65532:65532",
		WorkingDir:   "/home/nonroot",
		Env:          []string{"PATH=/usr/local/bin", "SSL_CERT_FILE=/" + caPath},
		ExposedPorts: map[string]struct{}{"18000/tcp": {}, "18080/tcp": {}},
		Labels: map[string]string{
			"org.opencontainers.image.title":       "weighstation",
			"org.opencontainers.image.description": "weighstation control plane (xDS for Envoy) with the weighstation Wasm filter module",
			"org.opencontainers.image.licenses":    "Apache-2.0",
			"org.opencontainers.image.source":      meta.Source,
			"org.opencontainers.image.revision":    meta.Revision,
			"org.opencontainers.image.version":     meta.Version,
			"org.opencontainers.image.created":     meta.Created.UTC().Format(time.RFC3339),
		},
	}
	return mutate.ConfigFile(img, cfg)
}
