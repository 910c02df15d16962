package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// `weighstation check` (the chart's helm test) against the real gateway: acme's max_payload is
// its maxMessageBytes (256KiB), and one byte more is refused on NATS; a Kafka record of that
// size, from a client no policy identifies (anonymous, 64KiB), too.
func TestCheckSeesALimitRefuseIt(t *testing.T) {
	cmd := exec.Command(filepath.Join(root, ".tools", "bin", "weighstation"), "check",
		"--nats", "127.0.0.1:"+strconv.Itoa(ports.NATS), "--nats-user", "acme", "--kafka", "127.0.0.1:"+strconv.Itoa(ports.Kafka))
	cmd.Env = append(os.Environ(), "WEIGHSTATION_CHECK_NATS_PASSWORD=acme-secret")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("weighstation check: %v\n%s", err, out)
	}
	for _, want := range []string{"max_payload 262144; a message of 262145 bytes was refused", "a record of 262145 bytes was refused (MESSAGE_TOO_LARGE)"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("weighstation check printed no %q:\n%s", want, out)
		}
	}
}
