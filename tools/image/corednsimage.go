package main

import (
	"fmt"
	"os/exec"
	"regexp"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// corednsImage is cluster DNS for the node tests: our CoreDNS build (helm/k8s/coredns, static)
// as /coredns, run as 65532 as the upstream image does.
func corednsImage(binary string, meta nodeMeta) (nodeImage, error) {
	if err := static(binary); err != nil {
		return nodeImage{}, err
	}
	version, err := corednsVersion(binary)
	if err != nil {
		return nodeImage{}, err
	}
	t := newTree()
	if err := t.host("coredns", binary); err != nil {
		return nodeImage{}, err
	}
	parts, err := singleLayer(t, meta, "/coredns "+version+" (helm/k8s/coredns, static)")
	if err != nil {
		return nodeImage{}, err
	}
	return nodeImage{
		name: "coredns", version: version, description: "CoreDNS " + version + " with the plugins a cluster's DNS needs",
		parts:  parts,
		config: v1.Config{Entrypoint: []string{"/coredns"}, User: "65532:65532"},
	}, nil
}

// coredns -version: "CoreDNS-1.15.0".
var corednsVersionRE = regexp.MustCompile(`CoreDNS-([0-9]+\.[0-9]+\.[0-9]+)`)

func corednsVersion(binary string) (string, error) {
	out, err := exec.Command(binary, "-version").Output()
	if err != nil {
		return "", fmt.Errorf("%s -version: %w", binary, err)
	}
	m := corednsVersionRE.FindSubmatch(out)
	if m == nil {
		return "", fmt.Errorf("%s -version printed no version: %q", binary, out)
	}
	return string(m[1]), nil
}
