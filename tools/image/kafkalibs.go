package main

import (
	"archive/zip"
	"bufio"
	"bytes"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// kafkaLibsLayer is Kafka's jars as /opt/kafka/libs, above the JRE layer: the broker runs them,
// and the e2e tests' Java clients are compiled against and run with all of them (the
// kafka-clients jar and Kafka's own tools), so the clients image carries this same layer.
//
// zstd-jni, snappy-java and lz4-java unpack a native library from their jar at run time; the
// layer carries the libraries those need beyond the JRE's (zstd-jni's libpthread.so.0), or a
// producer compressing with zstd would fail to load it.
func kafkaLibsLayer(kafkaDir string, jre *tree, meta nodeMeta) (*tree, part, error) {
	t := newTree(jre)
	libs := filepath.Join(kafkaDir, "libs")
	if err := t.hostDir("opt/kafka/libs", libs, func(rel string) bool { return !strings.HasSuffix(rel, ".jar") }); err != nil {
		return nil, part{}, err
	}
	natives, cleanup, err := jarNatives(libs)
	defer cleanup()
	if err != nil {
		return nil, part{}, err
	}
	needed, err := libraries(nil, natives...)
	if err != nil {
		return nil, part{}, err
	}
	for _, l := range needed {
		if err := t.host(l, l); err != nil {
			return nil, part{}, err
		}
	}
	l, err := compressedLayer(t.list(), meta.created)
	if err != nil {
		return nil, part{}, err
	}
	return t, part{layer: l, comment: "Kafka's jars (/opt/kafka/libs) and the libraries their native code needs"}, nil
}

// jarNatives writes the x86-64 Linux shared libraries inside the jars to a temporary directory
// (ldd reads files) and lists them; cleanup removes it.
func jarNatives(libs string) ([]string, func(), error) {
	tmp, err := os.MkdirTemp("", "weighstation-image-natives-")
	if err != nil {
		return nil, func() {}, err
	}
	cleanup := func() { os.RemoveAll(tmp) }
	jars, err := filepath.Glob(filepath.Join(libs, "*.jar"))
	if err != nil {
		return nil, cleanup, err
	}
	var out []string
	for _, j := range jars {
		zr, err := zip.OpenReader(j)
		if err != nil {
			return nil, cleanup, err
		}
		for _, f := range zr.File {
			lower := strings.ToLower(f.Name)
			if !strings.HasSuffix(lower, ".so") || !strings.Contains(lower, "linux/") ||
				!(strings.Contains(lower, "/amd64/") || strings.Contains(lower, "/x86_64/")) {
				continue
			}
			data, err := readZipFile(f)
			if err != nil {
				zr.Close()
				return nil, cleanup, err
			}
			// The path says Linux on x86-64; the header must agree (not a musl or 32-bit build).
			ef, err := elf.NewFile(bytes.NewReader(data))
			if err != nil || ef.Machine != elf.EM_X86_64 || ef.Class != elf.ELFCLASS64 {
				continue
			}
			p := filepath.Join(tmp, fmt.Sprintf("%d-%s", len(out), path.Base(f.Name)))
			if err := os.WriteFile(p, data, 0o644); err != nil {
				zr.Close()
				return nil, cleanup, err
			}
			out = append(out, p)
		}
		zr.Close()
	}
	return out, cleanup, nil
}

func readZipFile(f *zip.File) ([]byte, error) {
	rc, err := f.Open()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// kafkaVersion is the version kafka-clients says it is (kafka/kafka-version.properties), the
// one `kafka.Kafka --version` prints.
func kafkaVersion(kafkaDir string) (string, error) {
	jars, err := filepath.Glob(filepath.Join(kafkaDir, "libs", "kafka-clients-*.jar"))
	if err != nil {
		return "", err
	}
	if len(jars) != 1 {
		return "", fmt.Errorf("%s/libs holds %d kafka-clients jars, want 1", kafkaDir, len(jars))
	}
	zr, err := zip.OpenReader(jars[0])
	if err != nil {
		return "", err
	}
	defer zr.Close()
	f, err := zr.Open("kafka/kafka-version.properties")
	if err != nil {
		return "", fmt.Errorf("%s: %w", jars[0], err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(s.Text()), "version="); ok {
			return v, nil
		}
	}
	return "", fmt.Errorf("%s names no version", jars[0])
}
