package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/weighstation/weighstation/helm/node/cluster"
)

// badRelease: a release whose pods cannot start — a TLS Secret that does not exist, an Envoy
// image that is not on the node (none can be pulled here) — is reported by what a user reads:
// the namespace's events name the missing Secret and the image, not a bare timeout.
func badRelease(t *testing.T) {
	const ns = "bad-values"
	values, err := k.Write("bad-values.yaml", `controlPlane:
  image: {repository: `+cluster.Repository(im.ControlPlane)+`, tag: "`+cluster.Tag(im.ControlPlane)+`"}
  replicas: 1
envoy:
  image: {repository: weighstation.local/envoy, tag: no-such-version}
  replicas: 1
nats:
  servers: [nats://nats-0.nats.nats.svc.cluster.local:4222]
kafka:
  enabled: false
tls:
  secretName: no-such-secret
  nats: {enabled: true}
crds:
  install: false
`)
	if err != nil {
		t.Fatal(err)
	}
	helm(t, "install", "bad", root+"/helm/weighstation", "-n", ns, "--create-namespace", "-f", values)
	defer helm(t, "uninstall", "bad", "-n", ns)
	for _, w := range []struct{ labels, want string }{
		{"app.kubernetes.io/instance=bad," + cluster.CPLabels, `secret "no-such-secret" not found`},
		{"app.kubernetes.io/instance=bad," + cluster.EnvoyLabels, "weighstation.local/envoy:no-such-version"},
	} {
		_, err := k.WaitReady(ns, w.labels, 1, 30*time.Second)
		if err == nil {
			t.Fatalf("pods %s of a release that cannot start became Ready", w.labels)
		}
		if !strings.Contains(err.Error(), w.want) || !strings.Contains(err.Error(), "events in "+ns) {
			t.Errorf("a pod that cannot start is reported without %q in its events:\n%v", w.want, err)
		} else {
			t.Logf("reported with its events: …%s…", w.want)
		}
	}
}
