package kubesource

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/weighstation/weighstation/control-plane/internal/xds"
)

// GatewaysPath is where a control plane lists the gateways connected to it (on its ops
// listener), for the replica that writes status.
const GatewaysPath = "/gateways"

// Fleet is every gateway connected to any control plane replica. Envoy pods spread their xDS
// streams over the replicas, so the one writing status asks each peer for its gateways: a
// gateway counts toward "n/m gateways" wherever it is connected. A peer that does not answer
// within the timeout leaves its gateways out of both counts until it answers again.
type Fleet struct {
	Own     func() []xds.NodeStatus
	Peers   func(ctx context.Context) ([]string, error) // host:port of the other replicas' ops listeners
	Client  *http.Client
	Timeout time.Duration
}

// Nodes merges this replica's gateways with its peers'; a gateway connected anywhere is
// connected. An error says the peers could not be listed: the gateways are this replica's only.
func (f *Fleet) Nodes(ctx context.Context) ([]xds.NodeStatus, error) {
	all := f.Own()
	if f.Peers == nil {
		return all, nil
	}
	peers, err := f.Peers(ctx)
	if err != nil {
		return all, err
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, p := range peers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nodes := f.fetch(ctx, p)
			mu.Lock()
			all = append(all, nodes...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	byID := map[string]int{}
	out := all[:0:0]
	for _, n := range all {
		i, seen := byID[n.ID]
		switch {
		case !seen:
			byID[n.ID] = len(out)
			out = append(out, n)
		default:
			// A node's workers poll the tenant feed of any replica: each replica knows some.
			workers := xds.MergeWorkers(out[i].Workers, n.Workers)
			if n.Connected && !out[i].Connected {
				out[i] = n
			}
			out[i].Workers = workers
		}
	}
	now := time.Now()
	for i := range out {
		xds.Settle(&out[i], now)
	}
	return out, nil
}

func (f *Fleet) fetch(ctx context.Context, peer string) []xds.NodeStatus {
	ctx, cancel := context.WithTimeout(ctx, f.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+peer+GatewaysPath, nil)
	if err != nil {
		return nil
	}
	resp, err := f.Client.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var nodes []xds.NodeStatus
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&nodes) != nil {
		return nil
	}
	return nodes
}

// GatewaysHandler serves this replica's own gateways at GatewaysPath.
func GatewaysHandler(own func() []xds.NodeStatus) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(own())
	})
}
