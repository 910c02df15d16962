package e2e

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"
)

// Every Wasm VM of the gateway (one per worker, and the main thread's) reports usage and polls
// the tenant feed under a token of its own. The token was the time the VM first configured,
// and the workers one configuration reaches read the same microsecond of Envoy's clock (about
// one start in three here): the control plane then counted two workers' usage reports as one
// worker's, and dropped those of the one behind as already counted.
func TestEveryFilterVMIsToldApart(t *testing.T) {
	const vms = 3 // the stack's --concurrency 2, and the main thread
	tokens := map[string]map[string]bool{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the workers' tokens by protocol: %v", tokens)
		}
	})
	eventually(t, 10*time.Second, "each protocol's filter polling from 3 VMs under tokens of their own", func() bool {
		resp, err := http.Get("http://" + addr(ports.ControlPlane) + "/status")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var st struct {
			Nodes []struct {
				Workers []struct{ Token, Protocol string }
			}
		}
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
			t.Fatal(err)
		}
		tokens = map[string]map[string]bool{"nats": {}, "kafka": {}}
		for _, n := range st.Nodes {
			for _, w := range n.Workers {
				tokens[w.Protocol][w.Token] = true
			}
		}
		return len(tokens["nats"]) >= vms && len(tokens["kafka"]) >= vms
	})
	t.Logf("tokens: nats %d, kafka %d", len(tokens["nats"]), len(tokens["kafka"]))
}
