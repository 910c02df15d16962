package main

import (
	"debug/elf"
	"fmt"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// pauseImage is the pod sandbox image: our pause program (tools/image/pause) as /pause, and
// nothing else. It runs as 65535, as the upstream pause image does.
func pauseImage(binary string, meta nodeMeta) (nodeImage, error) {
	if err := static(binary); err != nil {
		return nodeImage{}, err
	}
	t := newTree()
	if err := t.host("pause", binary); err != nil {
		return nodeImage{}, err
	}
	parts, err := singleLayer(t, meta, "/pause (tools/image/pause, static)")
	if err != nil {
		return nodeImage{}, err
	}
	return nodeImage{
		name: "pause", version: "1", description: "the pod sandbox's first process: waits for SIGTERM, reaps orphans",
		parts:  parts,
		config: v1.Config{Entrypoint: []string{"/pause"}, User: "65535:65535"},
	}, nil
}

// static refuses a program that needs a loader: the pause image has no libraries.
func static(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked; build it with CGO_ENABLED=0", path)
		}
	}
	return nil
}
