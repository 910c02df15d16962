package main

import (
	"fmt"
	"os/exec"
	"regexp"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// natsUser runs the server: not root, with no home (JetStream's store is wherever the
// configuration or a volume puts it; /tmp by default).
var natsUser = account{name: "nats", uid: 1000}

// natsServerImage is nats-server (as `make tools` installed it, linked against glibc) as
// /usr/local/bin/nats-server with the libraries and loader it needs.
func natsServerImage(binary string, meta nodeMeta) (nodeImage, error) {
	version, err := natsServerVersion(binary)
	if err != nil {
		return nodeImage{}, err
	}
	t := newTree()
	if err := t.host("usr/local/bin/nats-server", binary); err != nil {
		return nodeImage{}, err
	}
	if err := t.withLibraries(); err != nil {
		return nodeImage{}, err
	}
	t.base(natsUser)
	parts, err := singleLayer(t, meta, "nats-server "+version+", its libraries, the nats user (1000)")
	if err != nil {
		return nodeImage{}, err
	}
	return nodeImage{
		name: "nats-server", version: version, description: "nats-server " + version,
		parts: parts,
		config: v1.Config{
			Entrypoint:   []string{"/usr/local/bin/nats-server"},
			User:         natsUser.user(),
			Env:          []string{"PATH=/usr/local/bin"},
			ExposedPorts: map[string]struct{}{"4222/tcp": {}, "6222/tcp": {}, "8222/tcp": {}},
		},
	}, nil
}

// nats-server --version: "nats-server: v2.12.15"; the tag drops the v, as the official images do.
var natsServerVersionRE = regexp.MustCompile(`nats-server: v([0-9]+\.[0-9]+\.[0-9]+\S*)`)

func natsServerVersion(binary string) (string, error) {
	out, err := exec.Command(binary, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("%s --version: %w", binary, err)
	}
	m := natsServerVersionRE.FindSubmatch(out)
	if m == nil {
		return "", fmt.Errorf("%s --version printed no version: %q", binary, out)
	}
	return string(m[1]), nil
}
