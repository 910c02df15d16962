package cluster

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// NodeImages are the images `make node-images` assembles (tools/image) for the node.
var NodeImages = []string{"pause", "coredns", "envoy", "nats-server", "kafka", "clients"}

// Images are the images the setup runs, by the references their OCI layouts give them.
type Images struct {
	// ControlPlane is `make image`'s, as repository:tag; ControlPlaneDigest its manifest's
	// digest, which the chart pins (what `make image` printed).
	ControlPlane, ControlPlaneDigest            string
	Envoy, NATS, Kafka, Clients, Pause, CoreDNS string
	// Layouts are the OCI layouts to import into the node's containerd, as LAYOUT=NAME (the
	// repository their references are imported under).
	Layouts []string
}

// ImagesIn reads the OCI layouts of the control plane's image (make image) and of the node
// images (make node-images) under root's .tools/image.
func ImagesIn(root string) (Images, error) {
	dir := filepath.Join(root, ".tools", "image")
	var im Images
	// The control plane's layout names its manifest by tag only (org.opencontainers.image.ref.name):
	// it is imported as docker.io/library/weighstation, which the chart's "weighstation" means.
	cp, err := readIndex(filepath.Join(dir, "oci"))
	if err != nil {
		return im, err
	}
	im.ControlPlane, im.ControlPlaneDigest = "weighstation:"+cp.ref, cp.digest
	im.Layouts = append(im.Layouts, filepath.Join(dir, "oci")+"=docker.io/library/weighstation")
	for _, name := range NodeImages {
		layout := filepath.Join(dir, "node", name, "oci")
		ix, err := readIndex(layout)
		if err != nil {
			return im, err
		}
		if ix.name == "" {
			return im, fmt.Errorf("%s: its index names no image (io.containerd.image.name)", layout)
		}
		repository, _, _ := strings.Cut(ix.name, ":")
		im.Layouts = append(im.Layouts, layout+"="+repository)
		switch name {
		case "pause":
			im.Pause = ix.name
		case "coredns":
			im.CoreDNS = ix.name
		case "envoy":
			im.Envoy = ix.name
		case "nats-server":
			im.NATS = ix.name
		case "kafka":
			im.Kafka = ix.name
		case "clients":
			im.Clients = ix.name
		}
	}
	return im, nil
}

// index is the one image an OCI layout holds.
type index struct{ name, ref, digest string }

func readIndex(layout string) (index, error) {
	b, err := os.ReadFile(filepath.Join(layout, "index.json"))
	if err != nil {
		return index{}, fmt.Errorf("%w (make image node-images)", err)
	}
	var ix struct {
		Manifests []struct {
			Digest      string            `json:"digest"`
			Annotations map[string]string `json:"annotations"`
		} `json:"manifests"`
	}
	if err := json.Unmarshal(b, &ix); err != nil || len(ix.Manifests) != 1 {
		return index{}, fmt.Errorf("%s: not an OCI layout of one image (%v)", layout, err)
	}
	m := ix.Manifests[0]
	return index{name: m.Annotations["io.containerd.image.name"], ref: m.Annotations["org.opencontainers.image.ref.name"], digest: m.Digest}, nil
}

// Repository and Tag split an image reference name:tag (names here have no registry port).
func Repository(image string) string { r, _, _ := strings.Cut(image, ":"); return r }
func Tag(image string) string        { _, t, _ := strings.Cut(image, ":"); return t }
