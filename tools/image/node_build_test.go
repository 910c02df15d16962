//go:build nodeimages

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// kafka and clients share their bottom two layers, the JRE and Kafka's jars: one digest each,
// which containerd stores and unpacks once.
func TestNodeKafkaAndClientsShareTheJREAndKafkasJars(t *testing.T) {
	dir := nodeDir(t)
	var layers [2][]string
	for i, name := range []string{"kafka", "clients"} {
		img, err := imageIn(filepath.Join(dir, name, "oci"))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range must(img.Layers()) {
			layers[i] = append(layers[i], must(l.Digest()).String())
		}
	}
	if len(layers[0]) != 3 || len(layers[1]) != 3 {
		t.Fatalf("kafka has %d layers, clients %d; want 3 each (JRE, Kafka's jars, their own)", len(layers[0]), len(layers[1]))
	}
	for i := range 2 {
		if layers[0][i] != layers[1][i] {
			t.Errorf("layer %d: kafka's %s, clients' %s", i, layers[0][i], layers[1][i])
		}
	}
	if layers[0][2] == layers[1][2] {
		t.Error("kafka's and clients' own layers are one")
	}
}

// The same inputs are the same images: built again, in a new process, with the flags make
// node-images used (NODE_IMAGE_FLAGS), each digest is the one it wrote.
func TestNodeImagesAreReproducible(t *testing.T) {
	dir := nodeDir(t)
	flags := strings.Fields(os.Getenv("NODE_IMAGE_FLAGS"))
	if len(flags) == 0 {
		t.Fatal("NODE_IMAGE_FLAGS is not set: run the test with make test-node-images")
	}
	again := t.TempDir()
	out, err := exec.Command("go", append(append([]string{"run", ".", "node"}, flags...), "--out", again)...).CombinedOutput()
	if err != nil {
		t.Fatalf("building again: %v\n%s", err, out)
	}
	for _, name := range nodeImages {
		want, err := os.ReadFile(filepath.Join(dir, name, "digest"))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(again, name, "digest"))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("%s built again: %s; make node-images built %s", name, strings.TrimSpace(string(got)), strings.TrimSpace(string(want)))
		}
	}
}
