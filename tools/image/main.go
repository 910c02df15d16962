// Command weighstation-image assembles the control-plane image from the build outputs with
// go-containerregistry — no container daemon, no base image pulled — and writes it as an OCI
// layout and a docker-archive tarball (`make image`); `node` assembles, the same way and from
// files on this machine, the other images a single-node Kubernetes test imports into
// containerd (pause, envoy, nats-server, kafka, clients: `make node-images`); `unpack` writes
// an image's root filesystem to a directory (the chart's pod test runs what it finds there).
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

const usage = `usage:
  weighstation-image build --binary FILE --filter FILE --impact FILE --revision SHA --created UNIX --out DIR [--version V] [--ca-bundle FILE]
  weighstation-image node --created UNIX --out DIR [--only pause,coredns,envoy,nats-server,kafka,clients]
      [--pause FILE] [--coredns FILE] [--envoy FILE] [--nats-server FILE] [--nats FILE] [--bench FILE] [--k8s-client FILE]
      [--java-home DIR] [--kafka DIR] [--probes DIR] [--clients-version V] [--registry weighstation.local]
  weighstation-image unpack --layout DIR --to DIR
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "build":
		err = buildCmd(os.Args[2:])
	case "node":
		err = nodeCmd(os.Args[2:])
	case "unpack":
		err = unpackCmd(os.Args[2:])
	case "-h", "-help", "--help", "help":
		fmt.Print(usage)
		return
	default:
		err = fmt.Errorf("unknown command %q\n%s", os.Args[1], usage)
	}
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "weighstation-image:", err)
		os.Exit(1)
	}
}

func buildCmd(args []string) error {
	fs := flag.NewFlagSet("build", flag.ContinueOnError)
	var in Inputs
	var meta Meta
	fs.StringVar(&in.Binary, "binary", "", "the static weighstation binary (CGO_ENABLED=0)")
	fs.StringVar(&in.Filter, "filter", "", "weighstation_filter.wasm")
	fs.StringVar(&in.Impact, "impact", "", "weighstation_impact.wasm")
	fs.StringVar(&in.CABundle, "ca-bundle", "", "CA certificates for the control plane's own outbound TLS (a PEM bundle)")
	fs.StringVar(&meta.Revision, "revision", "", "the commit the outputs were built from")
	fs.StringVar(&meta.Version, "version", "dev", "the image's version label and tag")
	fs.StringVar(&meta.Source, "source", "https://github.com/weighstation/weighstation", "the source repository label")
	fs.StringVar(&meta.Arch, "arch", runtime.GOARCH, "the architecture the binary was built for")
	created := fs.Int64("created", 0, "the commit's time (Unix seconds): the image's creation time and its files' mtime")
	out := fs.String("out", "", "directory for oci/ (an OCI layout) and weighstation.tar (docker-archive)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if in.Binary == "" || in.Filter == "" || in.Impact == "" || meta.Revision == "" || *created == 0 || *out == "" {
		return fmt.Errorf("build needs --binary, --filter, --impact, --revision, --created and --out\n%s", usage)
	}
	meta.Created = time.Unix(*created, 0).UTC()
	img, err := Build(in, meta)
	if err != nil {
		return err
	}
	tag, err := name.NewTag("weighstation:" + meta.Version)
	if err != nil {
		return err
	}
	digest, size, err := write(img, output{
		layout: filepath.Join(*out, "oci"), archive: filepath.Join(*out, "weighstation.tar"), digest: filepath.Join(*out, "digest"),
		tag: tag, annotations: map[string]string{"org.opencontainers.image.ref.name": meta.Version},
	})
	if err != nil {
		return err
	}
	fmt.Printf("weighstation:%s %s (%d bytes compressed)\n  OCI layout:     %s\n  docker-archive: %s\n",
		meta.Version, digest, size, filepath.Join(*out, "oci"), filepath.Join(*out, "weighstation.tar"))
	return nil
}

// output is where write puts one image: an OCI layout (annotated with the image's name), a file
// holding its digest and, when archive is set, a docker-archive tarball tagged tag (docker load).
type output struct {
	layout, archive, digest string
	tag                     name.Tag
	annotations             map[string]string
}

// write stores img as out says and returns its digest and its compressed size.
func write(img v1.Image, out output) (v1.Hash, int64, error) {
	digest, err := img.Digest()
	if err != nil {
		return v1.Hash{}, 0, err
	}
	if err := os.RemoveAll(out.layout); err != nil {
		return digest, 0, err
	}
	p, err := layout.Write(out.layout, empty.Index)
	if err != nil {
		return digest, 0, err
	}
	if err := p.AppendImage(img, layout.WithAnnotations(out.annotations)); err != nil {
		return digest, 0, err
	}
	if out.archive != "" {
		if err := tarball.WriteToFile(out.archive, out.tag, img); err != nil {
			return digest, 0, err
		}
	}
	if err := os.WriteFile(out.digest, []byte(digest.String()+"\n"), 0o644); err != nil {
		return digest, 0, err
	}
	m, err := img.Manifest()
	if err != nil {
		return digest, 0, err
	}
	size := m.Config.Size
	for _, l := range m.Layers {
		size += l.Size
	}
	return digest, size, nil
}

func unpackCmd(args []string) error {
	fs := flag.NewFlagSet("unpack", flag.ContinueOnError)
	dir := fs.String("layout", "", "an OCI layout holding one image")
	to := fs.String("to", "", "the directory to write its root filesystem into (emptied first)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" || *to == "" {
		return fmt.Errorf("unpack needs --layout and --to\n%s", usage)
	}
	img, err := imageIn(*dir)
	if err != nil {
		return err
	}
	return unpack(img, *to)
}

// imageIn reads the one image of an OCI layout.
func imageIn(dir string) (v1.Image, error) {
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, err
	}
	idx, err := p.ImageIndex()
	if err != nil {
		return nil, err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	if len(m.Manifests) != 1 {
		return nil, fmt.Errorf("%s holds %d manifests, want 1", dir, len(m.Manifests))
	}
	return idx.Image(m.Manifests[0].Digest)
}
