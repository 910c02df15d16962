package kubesource

import (
	"context"
	"encoding/json"
	"fmt"
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
	nodes, _, err := f.nodes(ctx)
	return nodes, err
}

// Complete is Nodes when every peer answered, an error otherwise: a worker whose poll is held
// at a peer that did not answer would be missed.
func (f *Fleet) Complete(ctx context.Context) ([]xds.NodeStatus, error) {
	nodes, missing, err := f.nodes(ctx)
	if err == nil && missing > 0 {
		err = fmt.Errorf("%d control plane peers did not answer", missing)
	}
	return nodes, err
}

func (f *Fleet) nodes(ctx context.Context) (_ []xds.NodeStatus, missing int, _ error) {
	all := f.Own()
	if f.Peers == nil {
		return all, 0, nil
	}
	peers, err := f.Peers(ctx)
	if err != nil {
		return all, 0, err
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, p := range peers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nodes, ok := f.fetch(ctx, p)
			mu.Lock()
			all = append(all, nodes...)
			if !ok {
				missing++
			}
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
	return out, missing, nil
}

// fetch is a peer's gateways, and whether it answered.
func (f *Fleet) fetch(ctx context.Context, peer string) ([]xds.NodeStatus, bool) {
	ctx, cancel := context.WithTimeout(ctx, f.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+peer+GatewaysPath, nil)
	if err != nil {
		return nil, false
	}
	resp, err := f.Client.Do(req)
	if err != nil {
		return nil, false
	}
	defer resp.Body.Close()
	var nodes []xds.NodeStatus
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&nodes) != nil {
		return nil, false
	}
	return nodes, true
}

// GatewaysHandler serves this replica's own gateways at GatewaysPath.
func GatewaysHandler(own func() []xds.NodeStatus) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(own())
	})
}
