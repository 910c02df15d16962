package cluster

import (
	"archive/tar"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// NodeImages are the images `make node-images` assembles (tools/image) for the node.
var NodeImages = []string{"pause", "coredns", "envoy", "nats-server", "kafka", "clients"}

// Images are the tags of the images the setup runs, as their archives carry them.
type Images struct {
	ControlPlane, Envoy, NATS, Kafka, Clients, Pause, CoreDNS string
	// Archives are the docker-archive tarballs to import into the node's containerd.
	Archives []string
}

// ImagesIn reads the tags of the control plane's image (make image) and the node images (make
// node-images) under root's .tools/image.
func ImagesIn(root string) (Images, error) {
	dir := filepath.Join(root, ".tools", "image")
	var im Images
	var err error
	tag := func(archive string) string {
		if err != nil {
			return ""
		}
		var t string
		t, err = archiveTag(archive)
		im.Archives = append(im.Archives, archive)
		return t
	}
	node := func(name string) string { return tag(filepath.Join(dir, "node", name+".tar")) }
	im.ControlPlane = tag(filepath.Join(dir, "weighstation.tar"))
	im.Pause, im.CoreDNS, im.Envoy = node("pause"), node("coredns"), node("envoy")
	im.NATS, im.Kafka, im.Clients = node("nats-server"), node("kafka"), node("clients")
	return im, err
}

// archiveTag is the tag a docker-archive carries (its manifest.json's RepoTags).
func archiveTag(archive string) (string, error) {
	f, err := os.Open(archive)
	if err != nil {
		return "", fmt.Errorf("%w (make image node-images)", err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return "", fmt.Errorf("%s has no manifest.json", archive)
		}
		if err != nil {
			return "", fmt.Errorf("%s: %w", archive, err)
		}
		if h.Name != "manifest.json" {
			continue
		}
		var m []struct{ RepoTags []string }
		if err := json.NewDecoder(tr).Decode(&m); err != nil || len(m) == 0 || len(m[0].RepoTags) == 0 {
			return "", fmt.Errorf("%s: no tag in manifest.json", archive)
		}
		return m[0].RepoTags[0], nil
	}
}

// repository and tag split an image reference name:tag (names here have no registry port).
func repository(image string) string { r, _, _ := strings.Cut(image, ":"); return r }
func tag(image string) string        { _, t, _ := strings.Cut(image, ":"); return t }
