//go:build nodeimages

package main

import (
	"archive/tar"
	"debug/elf"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// nodeDir is where `make node-images` wrote the node images (NODE_IMAGE_DIR). These tests
// build only with the nodeimages tag (make test-node-images), as root: they chroot into the
// unpacked images.
func nodeDir(t *testing.T) string {
	t.Helper()
	v := os.Getenv("NODE_IMAGE_DIR")
	if v == "" {
		t.Fatal("NODE_IMAGE_DIR is not set: run the node image tests with make test-node-images")
	}
	if os.Geteuid() != 0 {
		t.Fatal("the node image tests chroot into the images and make PID namespaces: run them as root")
	}
	return v
}

// nodeRun is a program run in an unpacked image, as the image's user, with the image's
// environment; its output must contain want. {version} is the image's tag's version, {java}
// its JAVA_HOME.
type nodeRun struct {
	args []string
	env  []string
	want string
}

// nodeCases say what each node image is: how it runs, what it carries (paths, or patterns as
// path.Match takes them), which directories its
// user may write (path → owner; the rest are root's and not writable by others), whether it
// has a shell (kafka, a test broker, has bash; the others none), and programs to run in it.
var nodeCases = []struct {
	name       string
	user       string
	entrypoint []string
	cmd        []string
	files      []string
	writable   map[string]int
	shell      bool
	runs       []nodeRun
}{
	{
		name: "pause", user: "65535:65535", entrypoint: []string{"/pause"},
		files: []string{"pause"},
	},
	{
		name: "coredns", user: "65532:65532", entrypoint: []string{"/coredns"},
		files: []string{"coredns"},
		runs:  []nodeRun{{args: []string{"/coredns", "-version"}, want: "CoreDNS-{version}"}},
	},
	{
		name: "envoy", user: "101:101", entrypoint: []string{"/usr/local/bin/envoy"}, cmd: []string{"--config-path", "/etc/envoy/envoy.yaml"},
		files:    []string{"usr/local/bin/envoy", "lib64/ld-linux-x86-64.so.2", "lib/x86_64-linux-gnu/libc.so.6", "etc/passwd", "etc/group"},
		writable: map[string]int{"tmp": 0},
		runs:     []nodeRun{{args: []string{"envoy", "--version"}, want: "/{version}/Clean/RELEASE"}},
	},
	{
		name: "nats-server", user: "1000:1000", entrypoint: []string{"/usr/local/bin/nats-server"},
		files:    []string{"usr/local/bin/nats-server", "lib64/ld-linux-x86-64.so.2", "lib/x86_64-linux-gnu/libc.so.6"},
		writable: map[string]int{"tmp": 0},
		runs:     []nodeRun{{args: []string{"nats-server", "--version"}, want: "nats-server: v{version}"}},
	},
	{
		name: "kafka", user: "1000:1000", cmd: []string{"/opt/kafka/bin/kafka-start.sh"},
		files: []string{"{java}/bin/java", "{java}/lib/server/libjvm.so", "{java}/lib/modules", "{java}/lib/jvm.cfg",
			"{java}/conf/security/java.security", "{java}/lib/security/cacerts", "opt/kafka/libs/kafka-clients-{version}.jar",
			"opt/kafka/libs/kafka_2.13-{version}.jar", "opt/kafka/bin/kafka-start.sh", "opt/kafka/config/server.properties",
			"opt/kafka/config/log4j2.yaml", "bin/bash", "bin/cat", "bin/sed", "bin/mkdir", "lib/x86_64-linux-gnu/libpthread.so.0"},
		writable: map[string]int{"tmp": 0, "var/lib/kafka": 1000},
		shell:    true,
		runs: []nodeRun{
			{args: []string{"java", "-version"}, want: `openjdk version "17.`},
			{args: []string{"java", "kafka.Kafka", "--version"}, want: "{version}"},
			// What a StatefulSet's script does: the ordinal from the pod's name, a file written.
			{args: []string{"bash", "-c", `o=${HOSTNAME##*-}; mkdir -p /tmp/k && echo "node.id=__ID__" | sed "s/__ID__/$o/" >/tmp/k/p && cat /tmp/k/p`},
				env: []string{"HOSTNAME=kafka-2"}, want: "node.id=2"},
		},
	},
	{
		name: "clients", user: "1000:1000",
		files: []string{"usr/local/bin/nats", "usr/local/bin/weighstation-bench", "usr/local/bin/weighstation-k8s-client", "opt/weighstation/probes.jar",
			"{java}/bin/java", "{java}/lib/server/libjvm.so", "opt/kafka/libs/kafka-clients-*.jar"},
		writable: map[string]int{"tmp": 0, "home/clients": 1000},
		runs: []nodeRun{
			{args: []string{"nats", "--version"}, want: "v"},
			{args: []string{"weighstation-bench", "-h"}, want: "usage: weighstation-bench"},
			{args: []string{"weighstation-k8s-client"}, want: "--name is required"},
			{args: []string{"java", "-version"}, want: `openjdk version "17.`},
			// The probe, from the image's CLASSPATH, makes Kafka's producer and asks a broker that is
			// not there for metadata: kafka-clients loaded and ran.
			{args: []string{"java", "ProducerProbe", "127.0.0.1:1", "t", "c", "1", "1", "10"}, env: []string{"PROBE_PROPS=max.block.ms=300"},
				want: "org.apache.kafka.common.errors.TimeoutException"},
		},
	},
}

// Each node image read back: its tag, config, files and owners, that each ELF's libraries are
// all in it (the image's loader lists them in the unpacked root), and its programs run there.
func TestNodeImages(t *testing.T) {
	dir := nodeDir(t)
	for _, c := range nodeCases {
		t.Run(c.name, func(t *testing.T) {
			img, err := imageIn(filepath.Join(dir, c.name, "oci"))
			if err != nil {
				t.Fatal(err)
			}
			cf := must(img.ConfigFile())
			tag, ref := layoutName(t, filepath.Join(dir, c.name, "oci"))
			version, ok := strings.CutPrefix(tag, "weighstation.local/"+c.name+":")
			if !ok || version == "" || ref != version {
				t.Fatalf("the layout names the image %q (ref %q), want weighstation.local/%s:<version> (ref <version>)", tag, ref, c.name)
			}
			expand := strings.NewReplacer("{version}", version, "{java}", strings.TrimPrefix(envOf(cf, "JAVA_HOME"), "/")).Replace

			conf := cf.Config
			if conf.User != c.user || !slices.Equal(conf.Entrypoint, c.entrypoint) || !slices.Equal(conf.Cmd, c.cmd) {
				t.Errorf("user %q entrypoint %q cmd %q; want %q %q %q", conf.User, conf.Entrypoint, conf.Cmd, c.user, c.entrypoint, c.cmd)
			}
			if cf.OS != "linux" || cf.Architecture == "" || cf.Created.IsZero() || conf.Labels["org.opencontainers.image.version"] != version {
				t.Errorf("os %q, architecture %q, created %v, version label %q", cf.OS, cf.Architecture, cf.Created, conf.Labels["org.opencontainers.image.version"])
			}

			checkNodeFiles(t, headers(t, img), expand, c.files, c.writable, c.shell)

			root := t.TempDir()
			if err := unpack(img, root); err != nil {
				t.Fatal(err)
			}
			checkLibraries(t, root, envOf(cf, "JAVA_HOME"))
			for _, r := range c.runs {
				args := make([]string, len(r.args))
				for i, a := range r.args {
					args[i] = expand(a)
				}
				out, _ := chrootRun(t, root, conf.User, append(slices.Clone(conf.Env), r.env...), args...)
				if !strings.Contains(out, expand(r.want)) {
					t.Errorf("%q: want %q in\n%s", args, expand(r.want), out)
				}
			}
		})
	}
}

// checkNodeFiles: the files are there; every file is root's and only root may change it;
// every directory is root's but the writable ones (owned by their user; /tmp by root, 1777);
// no links, no devices; a shell only where the case says.
func checkNodeFiles(t *testing.T, hs map[string]*tar.Header, expand func(string) string, files []string, writable map[string]int, shell bool) {
	t.Helper()
	for _, f := range files {
		found := false
		for p, h := range hs {
			if ok, _ := path.Match(expand(f), p); ok && h.Typeflag == tar.TypeReg {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("/%s is not in the image", expand(f))
		}
	}
	for p, h := range hs {
		switch {
		case h.Typeflag == tar.TypeReg:
			if h.Uid != 0 || h.Mode&0o022 != 0 {
				t.Errorf("/%s: uid %d mode %o; files are root's, not writable by others", p, h.Uid, h.Mode)
			}
		case h.Typeflag == tar.TypeDir:
			owner, ok := writable[p]
			switch {
			case p == "tmp" && h.Mode != 0o1777:
				t.Errorf("/tmp: mode %o, want 1777", h.Mode)
			case ok && h.Uid != owner:
				t.Errorf("/%s: owned by %d, want %d", p, h.Uid, owner)
			case !ok && (h.Uid != 0 || h.Mode&0o022 != 0):
				t.Errorf("/%s: uid %d mode %o; only its listed directories are writable", p, h.Uid, h.Mode)
			}
		default:
			t.Errorf("/%s: type %q (the images hold files and directories only)", p, h.Typeflag)
		}
		if !shell && slices.Contains([]string{"sh", "bash", "ash", "dash", "busybox"}, path.Base(p)) {
			t.Errorf("/%s: this image has no shell", p)
		}
	}
	for w := range writable {
		if hs[w] == nil {
			t.Errorf("/%s is not in the image", w)
		}
	}
	if shell && hs["bin/bash"] == nil {
		t.Error("/bin/bash is not in the image")
	}
}

// checkLibraries has the image's own loader list the libraries of every ELF object in root, as
// ldd does, in a chroot: any "not found" is a library the image lacks. The native libraries
// Kafka's compression jars unpack at run time are listed too. libjvm.so, which the JRE's
// libraries need, is found through LD_LIBRARY_PATH, as the java launcher has loaded it by then.
func checkLibraries(t *testing.T, root, javaHome string) {
	t.Helper()
	var elfs []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		if ok, err := isELF(p); err != nil || !ok {
			return err
		}
		if static(p) == nil && !sharedObject(t, p) {
			return nil // a static program (pause): nothing to load
		}
		elfs = append(elfs, "/"+filepath.ToSlash(must(filepath.Rel(root, p))))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if libs := filepath.Join(root, "opt/kafka/libs"); exists(libs) {
		natives, cleanup, err := jarNatives(libs)
		defer cleanup()
		if err != nil {
			t.Fatal(err)
		}
		if len(natives) == 0 {
			t.Error("no native libraries in Kafka's jars (zstd-jni, snappy-java, lz4-java)")
		}
		for _, n := range natives {
			p := filepath.Join(root, "tmp", "native-"+path.Base(n))
			if err := os.WriteFile(p, must(os.ReadFile(n)), 0o644); err != nil {
				t.Fatal(err)
			}
			elfs = append(elfs, "/tmp/"+filepath.Base(p))
		}
	}
	env := []string{"PATH=/"}
	if javaHome != "" {
		env = append(env, "LD_LIBRARY_PATH="+javaHome+"/lib/server")
	}
	for _, e := range elfs {
		out, err := chrootRun(t, root, "0:0", env, "/lib64/ld-linux-x86-64.so.2", "--list", e)
		if err != nil || strings.Contains(out, "not found") {
			t.Errorf("%s: the image's loader cannot load it: %v\n%s", e, err, out)
		}
	}
	t.Logf("%d ELF objects, every library of each in the image", len(elfs))
}

// sharedObject says whether p is a shared library (which has no loader of its own to name).
func sharedObject(t *testing.T, p string) bool {
	f, err := elf.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	libs, err := f.ImportedLibraries()
	return err == nil && len(libs) > 0
}
