package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
)

// nodeImages are the images a single-node Kubernetes test imports, in the order they are built.
var nodeImages = []string{"pause", "coredns", "envoy", "nats-server", "kafka", "clients"}

// nodeInputs are the files on this machine the node images are assembled from.
type nodeInputs struct {
	pause, coredns, envoy, natsServer, nats, bench, k8sClient, javaHome, kafka, probes, clientsVersion string
}

// needs names the flags each image's inputs come from (flag, value), so that --only builds with
// fewer.
func (in nodeInputs) needs(image string) [][2]string {
	java := [][2]string{{"--java-home", in.javaHome}, {"--kafka", in.kafka}}
	switch image {
	case "pause":
		return [][2]string{{"--pause", in.pause}}
	case "envoy":
		return [][2]string{{"--envoy", in.envoy}}
	case "nats-server":
		return [][2]string{{"--nats-server", in.natsServer}}
	case "kafka":
		return java
	case "clients":
		return append(java, [][2]string{{"--nats", in.nats}, {"--bench", in.bench}, {"--probes", in.probes}}...)
	}
	return nil
}

func nodeCmd(args []string) error {
	fs := flag.NewFlagSet("node", flag.ContinueOnError)
	var in nodeInputs
	fs.StringVar(&in.pause, "pause", "", "the static pause program (tools/image/pause, CGO_ENABLED=0)")
	fs.StringVar(&in.coredns, "coredns", "", "CoreDNS (helm/k8s/coredns, static)")
	fs.StringVar(&in.envoy, "envoy", "", "the Envoy binary")
	fs.StringVar(&in.natsServer, "nats-server", "", "the nats-server binary")
	fs.StringVar(&in.nats, "nats", "", "the nats CLI")
	fs.StringVar(&in.bench, "bench", "", "weighstation-bench, the load harness")
	fs.StringVar(&in.k8sClient, "k8s-client", "", "weighstation-k8s-client, the node tests' client pod (helm/node, static)")
	fs.StringVar(&in.javaHome, "java-home", "", "OpenJDK 17's home (Debian's /usr/lib/jvm/java-17-openjdk-amd64)")
	fs.StringVar(&in.kafka, "kafka", "", "Kafka's directory, its jars in libs/")
	fs.StringVar(&in.probes, "probes", "", "the directory javac wrote the e2e tests' Java probes to")
	fs.StringVar(&in.clientsVersion, "clients-version", "dev", "the clients image's tag")
	registry := fs.String("registry", "weighstation.local", "the images are tagged <registry>/<name>:<version>")
	only := fs.String("only", strings.Join(nodeImages, ","), "the images to build, comma-separated")
	source := fs.String("source", "https://github.com/weighstation/weighstation", "the source repository label")
	created := fs.Int64("created", 0, "the images' creation time and their files' mtime (Unix seconds)")
	out := fs.String("out", "", "directory for <name>/oci (an OCI layout) and <name>/digest")
	if err := fs.Parse(args); err != nil {
		return err
	}
	selected := strings.Split(*only, ",")
	for _, s := range selected {
		if !slices.Contains(nodeImages, s) {
			return fmt.Errorf("--only: no image %q (there are %s)", s, strings.Join(nodeImages, ", "))
		}
	}
	if *created == 0 || *out == "" {
		return fmt.Errorf("node needs --created and --out\n%s", usage)
	}
	for _, image := range selected {
		for _, f := range in.needs(image) {
			if f[1] == "" {
				return fmt.Errorf("the %s image needs %s\n%s", image, f[0], usage)
			}
		}
	}
	meta := nodeMeta{created: time.Unix(*created, 0).UTC(), arch: runtime.GOARCH, source: *source}
	b := nodeBuild{in: in, meta: meta}
	for _, image := range nodeImages {
		if !slices.Contains(selected, image) {
			continue
		}
		n, err := b.image(image)
		if err != nil {
			return fmt.Errorf("%s: %w", image, err)
		}
		if err := writeNode(n, meta, *registry, *out); err != nil {
			return fmt.Errorf("%s: %w", image, err)
		}
	}
	return nil
}

// nodeBuild builds the images, the layers kafka and clients share once.
type nodeBuild struct {
	in        nodeInputs
	meta      nodeMeta
	jre, libs *tree
	shared    []part
}

func (b *nodeBuild) image(image string) (nodeImage, error) {
	switch image {
	case "pause":
		return pauseImage(b.in.pause, b.meta)
	case "coredns":
		return corednsImage(b.in.coredns, b.meta)
	case "envoy":
		return envoyImage(b.in.envoy, b.meta)
	case "nats-server":
		return natsServerImage(b.in.natsServer, b.meta)
	}
	if err := b.sharedLayers(); err != nil {
		return nodeImage{}, err
	}
	if image == "kafka" {
		return kafkaImage(b.in.kafka, b.in.javaHome, b.jre, b.libs, b.shared, b.meta)
	}
	return clientsImage(clientsInputs{nats: b.in.nats, bench: b.in.bench, k8sClient: b.in.k8sClient, probes: b.in.probes, javaHome: b.in.javaHome,
		version: b.in.clientsVersion}, b.jre, b.libs, b.shared, b.meta)
}

// sharedLayers builds the JRE and Kafka jars layers the first time kafka or clients needs them.
func (b *nodeBuild) sharedLayers() error {
	if b.shared != nil {
		return nil
	}
	jre, jrePart, err := jreLayer(b.in.javaHome, b.meta)
	if err != nil {
		return err
	}
	libs, libsPart, err := kafkaLibsLayer(b.in.kafka, jre, b.meta)
	if err != nil {
		return err
	}
	b.jre, b.libs, b.shared = jre, libs, []part{jrePart, libsPart}
	return nil
}

// writeNode writes out/<name>/oci and out/<name>/digest. The layout names the image
// <registry>/<name>:<version> (io.containerd.image.name) and <version> (ref.name): the node
// imports it as an OCI archive under that name, by tag and by digest.
func writeNode(n nodeImage, meta nodeMeta, registry, out string) error {
	img, err := n.assemble(meta)
	if err != nil {
		return err
	}
	tag, err := name.NewTag(registry+"/"+n.name+":"+n.version, name.StrictValidation)
	if err != nil {
		return err
	}
	dir := filepath.Join(out, n.name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	digest, size, err := write(img, output{
		layout: filepath.Join(dir, "oci"), digest: filepath.Join(dir, "digest"),
		annotations: map[string]string{"org.opencontainers.image.ref.name": n.version, "io.containerd.image.name": tag.String()},
	})
	if err != nil {
		return err
	}
	fmt.Printf("%s %s (%d layer(s), %.1f MB compressed)\n  %s\n", tag, digest, len(n.parts), float64(size)/1e6, filepath.Join(dir, "oci"))
	return nil
}
