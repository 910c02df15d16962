package main

import (
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// nodeMeta is what every node image says about itself; created is its files' mtime and its
// creation time, so that the same inputs give the same digest.
type nodeMeta struct {
	created time.Time
	arch    string
	source  string
}

// nodeImage is one image a single-node Kubernetes test imports: its name (weighstation.local/
// <name>:<version>), its layers bottom up, and how it runs.
type nodeImage struct {
	name, version, description string
	parts                      []part
	config                     v1.Config
}

// assemble makes the image from nothing (no base image), as Build does: the layers, then an
// OCI config with the labels the control plane's image has.
func (n nodeImage) assemble(meta nodeMeta) (v1.Image, error) {
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	for _, p := range n.parts {
		var err error
		img, err = mutate.Append(img, mutate.Addendum{Layer: p.layer, History: v1.History{
			Created: v1.Time{Time: meta.created}, CreatedBy: "weighstation-image node (make node-images)", Comment: p.comment,
		}})
		if err != nil {
			return nil, err
		}
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.Architecture, cfg.OS = meta.arch, "linux"
	cfg.Created = v1.Time{Time: meta.created}
	cfg.Config = n.config
	labels := map[string]string{
		"org.opencontainers.image.title":       n.name,
		"org.opencontainers.image.description": n.description,
		"org.opencontainers.image.source":      meta.source,
		"org.opencontainers.image.version":     n.version,
		"org.opencontainers.image.created":     meta.created.UTC().Format(time.RFC3339),
	}
	for k, v := range n.config.Labels {
		labels[k] = v
	}
	cfg.Config.Labels = labels
	return mutate.ConfigFile(img, cfg)
}

// singleLayer is the one layer of an image that shares none.
func singleLayer(t *tree, meta nodeMeta, comment string) ([]part, error) {
	l, err := compressedLayer(t.list(), meta.created)
	if err != nil {
		return nil, err
	}
	return []part{{layer: l, comment: comment}}, nil
}
