package main

import (
	"path"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// clientsUser runs the test clients; the nats CLI keeps its contexts in its home.
var clientsUser = account{name: "clients", uid: 1000, home: "/home/clients"}

// probesJar is where the clients image keeps the e2e tests' Java probes
// (control-plane/e2e/clients/java, compiled by javac against Kafka's jars).
const probesJar = "opt/weighstation/probes.jar"

// clientsInputs are the programs the clients image carries beyond the shared layers.
type clientsInputs struct {
	nats, bench, k8sClient, probes, javaHome, version string
}

// clientsImage is the test clients as pods run them: the nats CLI, weighstation-bench (with
// their libraries), weighstation-k8s-client (static), and the e2e tests' Java probes over the same JRE and Kafka jars layers as
// the kafka image (the probes run with Kafka's jars on the classpath, as the e2e tests run
// them). It has no default command: each pod names the client it runs. CLASSPATH holds the
// probes and Kafka's jars, so `java ProducerProbe …` or `java org.apache.kafka.tools.
// TopicCommand …` runs as is.
func clientsImage(in clientsInputs, jre, libs *tree, shared []part, meta nodeMeta) (nodeImage, error) {
	home, err := filepath.EvalSymlinks(in.javaHome)
	if err != nil {
		return nodeImage{}, err
	}
	t := newTree(jre, libs)
	if err := t.host("usr/local/bin/nats", in.nats); err != nil {
		return nodeImage{}, err
	}
	if err := t.host("usr/local/bin/weighstation-bench", in.bench); err != nil {
		return nodeImage{}, err
	}
	if err := t.host("usr/local/bin/weighstation-k8s-client", in.k8sClient); err != nil {
		return nodeImage{}, err
	}
	if err := t.withLibraries(); err != nil {
		return nodeImage{}, err
	}
	jar, err := jarOf(in.probes, meta.created)
	if err != nil {
		return nodeImage{}, err
	}
	t.file(probesJar, 0o644, jar)
	t.base(clientsUser)
	l, err := compressedLayer(t.list(), meta.created)
	if err != nil {
		return nodeImage{}, err
	}
	return nodeImage{
		name: "clients", version: in.version, description: "the e2e tests' clients: nats CLI, weighstation-bench, the Java probes with kafka-clients",
		parts: append(append([]part(nil), shared...), part{layer: l, comment: "nats, weighstation-bench, weighstation-k8s-client, the Java probes, the clients user (1000)"}),
		config: v1.Config{
			User: clientsUser.user(),
			Env: []string{"PATH=/usr/local/bin:" + path.Join("/", home, "bin"), "JAVA_HOME=" + home,
				"CLASSPATH=/" + probesJar + ":/opt/kafka/libs/*", "HOME=" + clientsUser.home},
			WorkingDir: clientsUser.home,
		},
	}, nil
}
