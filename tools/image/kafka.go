package main

import (
	"embed"
	"fmt"
	"os"
	"path"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// broker holds what the kafka image adds to Kafka's jars: its start script, a single-node KRaft
// configuration and the logging configuration (.tools/kafka has the jars only).
//
//go:embed kafka-broker
var broker embed.FS

// brokerFiles are where the image puts the files of kafka-broker/.
var brokerFiles = []struct {
	path string
	mode int64
}{
	{"opt/kafka/bin/kafka-start.sh", 0o755},
	{"opt/kafka/config/server.properties", 0o644},
	{"opt/kafka/config/log4j2.yaml", 0o644},
}

// kafkaUser runs the broker; its home is the data directory, which it owns.
var kafkaUser = account{name: "kafka", uid: 1000, home: "/var/lib/kafka"}

// shellTools are what kafka-start.sh (and a StatefulSet's own script templating node.id from
// the pod's ordinal) runs: this is a test broker, not our image, and may have a shell.
// hostname is optional: without it the script uses $HOSTNAME.
var shellTools = []struct {
	name     string
	optional bool
}{{"bash", false}, {"cat", false}, {"sed", false}, {"mkdir", false}, {"hostname", true}}

// kafkaImage is a KRaft broker: the JRE layer, the Kafka jars layer, and a layer of the start
// script and its configuration, bash and the few tools it runs (with their libraries), the
// kafka user and its data directory. java is on PATH and Kafka's jars on CLASSPATH, so that
// `java kafka.Kafka --version` or a tool's class runs as is.
func kafkaImage(kafkaDir, javaHome string, jre, libs *tree, shared []part, meta nodeMeta) (nodeImage, error) {
	version, err := kafkaVersion(kafkaDir)
	if err != nil {
		return nodeImage{}, err
	}
	home, err := filepath.EvalSymlinks(javaHome)
	if err != nil {
		return nodeImage{}, err
	}
	t := newTree(jre, libs)
	for _, tool := range shellTools {
		src, err := hostTool(tool.name)
		if err != nil {
			if tool.optional {
				continue
			}
			return nodeImage{}, err
		}
		if err := t.host(path.Join("bin", tool.name), src); err != nil {
			return nodeImage{}, err
		}
	}
	if err := t.withLibraries(); err != nil {
		return nodeImage{}, err
	}
	for _, f := range brokerFiles {
		data, err := broker.ReadFile("kafka-broker/" + path.Base(f.path))
		if err != nil {
			return nodeImage{}, err
		}
		t.file(f.path, f.mode, data)
	}
	t.base(kafkaUser)
	l, err := compressedLayer(t.list(), meta.created)
	if err != nil {
		return nodeImage{}, err
	}
	return nodeImage{
		name: "kafka", version: version, description: "Apache Kafka " + version + " (KRaft) on OpenJDK 17, for tests",
		parts: append(append([]part(nil), shared...), part{layer: l, comment: "the start script and configuration, bash and coreutils, the kafka user (1000)"}),
		config: v1.Config{
			Cmd:  []string{"/opt/kafka/bin/kafka-start.sh"},
			User: kafkaUser.user(),
			Env: []string{"PATH=/opt/kafka/bin:" + path.Join("/", home, "bin") + ":/bin", "JAVA_HOME=" + home,
				"CLASSPATH=/opt/kafka/libs/*"},
			WorkingDir:   kafkaUser.home,
			ExposedPorts: map[string]struct{}{"9092/tcp": {}, "9093/tcp": {}},
		},
	}, nil
}

// hostTool is where this machine keeps a program the image carries as /bin/<name>; Debian
// merged /bin into /usr/bin, so either.
func hostTool(name string) (string, error) {
	for _, dir := range []string{"/bin", "/usr/bin"} {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s is not in /bin or /usr/bin", name)
}
