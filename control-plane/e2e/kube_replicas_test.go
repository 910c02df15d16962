package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/weighstation/weighstation/control-plane/internal/localstack"
)

// A second control plane replica, with no gateway of its own, stands by while the first holds
// the Lease: it writes nothing. When the first stops, it takes over, and counts the gateway
// connected to the first through the first's GatewaysPath. When it stops, the first takes over
// again.
func testReplicasTakeTurns(t *testing.T, k *k8sStack) {
	a := k.admin
	ports, err := localstack.FreePorts()
	if err != nil {
		t.Fatal(err)
	}
	first := "127.0.0.1:" + fmt.Sprint(k.ports.ControlPlane)
	second := "127.0.0.1:" + fmt.Sprint(ports.ControlPlane)
	kubeconfig := k.controlPlaneKubeconfig
	log, err := os.Create(filepath.Join(t.TempDir(), "second.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(root, ".tools/bin/weighstation"), "serve", "--policy-source", "kubernetes",
		"--kubeconfig", kubeconfig, "--platform-namespace", platformNS, "--leader-identity", "second",
		"--leader-lease-duration", "4s", "--leader-renew-deadline", "3s", "--leader-retry-period", "500ms",
		"--xds-listen", fmt.Sprintf("127.0.0.1:%d", ports.XDS), "--http-listen", second,
		"--nats-listen", fmt.Sprintf("127.0.0.1:%d", ports.NATS), "--kafka-listen", "",
		"--wasm-file", k.wasmFile, "--peers", first)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
			_ = cmd.Wait()
		}
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			b, _ := os.ReadFile(log.Name())
			t.Logf("second replica's log:\n%s", b)
			if resp, err := http.Get("http://" + first + "/status"); err == nil {
				b, _ = io.ReadAll(resp.Body)
				resp.Body.Close()
				t.Logf("first replica's /status: %s", b)
			}
			b, _ = os.ReadFile(filepath.Join(k.stack.LogDir(), "control-plane.log"))
			t.Logf("first replica's log:\n%s", b)
		}
	})
	holder := func() string {
		l, err := k.kube.CoordinationV1().Leases(platformNS).Get(context.Background(), "weighstation-policy-status", metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}
	globex := func() string {
		u, err := a.Resource(lpGVR).Namespace("team-b").Get(context.Background(), "globex", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return u.GetResourceVersion()
	}
	// Standing by: the first holds the Lease and, once globex's status is settled, does not
	// rewrite it.
	waitCondition(t, a, lpGVR, "team-b", "globex", "Programmed", metav1.ConditionTrue, "Programmed", "1/1 gateways", 20*time.Second)
	firstHolder := holder()
	version := globex()
	time.Sleep(3 * time.Second)
	if h := holder(); h == "second" || h != firstHolder {
		t.Fatalf("the Lease moved from %q to %q while its holder ran", firstHolder, h)
	}
	if v := globex(); v != version {
		t.Errorf("globex was rewritten (resourceVersion %s to %s) while nothing changed", version, v)
	}
	// The first stops, as in a rollout, and releases the Lease: the second takes it and writes
	// status. With the only gateway's control plane gone, an edit is Pending.
	k.stack.StopControlPlane()
	deadline := time.Now().Add(5 * time.Second)
	for holder() != "second" && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if h := holder(); h != "second" {
		t.Fatalf("the second replica did not take the Lease the first released: held by %q", h)
	}
	mustApply(t, a, lpGVR, strings.Replace(k8sGlobex, "8KiB", "16KiB", 1))
	waitCondition(t, a, lpGVR, "team-b", "globex", "Programmed", metav1.ConditionFalse, "Pending", "no gateway is connected", 2*time.Second)
	// The first comes back; the gateway reconnects to it and takes the edit. The second, still
	// writing status, counts that gateway through the first's list of its gateways.
	if err := k.stack.StartControlPlane("--peers", second); err != nil {
		t.Fatal(err)
	}
	k.waitMaxPayload(t, "k8s-globex", 16<<10, 5*time.Second)
	waitCondition(t, a, lpGVR, "team-b", "globex", "Programmed", metav1.ConditionTrue, "Programmed", "1/1 gateways", 2*time.Second)
	if h := holder(); h != "second" {
		t.Errorf("the Lease moved to %q while the second held it", h)
	}
	// The second stops: the first takes over.
	stop()
	mustApply(t, a, lpGVR, k8sGlobex)
	k.waitMaxPayload(t, "k8s-globex", 8<<10, 2*time.Second)
	waitCondition(t, a, lpGVR, "team-b", "globex", "Programmed", metav1.ConditionTrue, "Programmed", "1/1 gateways", 5*time.Second)
	if h := holder(); h == "second" || h == "" {
		t.Errorf("after the second stopped, the Lease is held by %q", h)
	}
}
