package usage

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// RelayedHeader marks a report one control plane passes to its peers, so they keep it and do
// not pass it on again.
const RelayedHeader = "X-Weighstation-Relayed"

// Relay passes every report a control plane receives to the other control plane replicas: an
// Envoy reports through the control plane Service to whichever replica its connection reaches,
// and each replica must see every report to answer /usage and /decisions for the whole gateway.
// Each peer has its own queue and sender, so a slow peer delays only its own reports.
type Relay struct {
	Peers  func(context.Context) ([]string, error) // host:port of the other replicas (see Peers)
	Client *http.Client
	Log    *slog.Logger

	mu    sync.Mutex
	peers map[string]chan []byte
	// Dropped counts reports not relayed to a peer because its queue was full.
	Dropped atomic.Uint64
}

// relayQueue bounds the reports waiting for one peer: about 10 s of a 100-worker gateway.
const relayQueue = 1000

// Run resolves the peers every 5 s until ctx ends, starting a sender for each new one and
// stopping those gone.
func (r *Relay) Run(ctx context.Context) {
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		r.resolve(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (r *Relay) resolve(ctx context.Context) {
	peers, err := r.Peers(ctx)
	if err != nil {
		r.Log.Warn("finding control plane peers", "err", err)
		return
	}
	now := map[string]bool{}
	for _, p := range peers {
		now[p] = true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.peers == nil {
		r.peers = map[string]chan []byte{}
	}
	for p, q := range r.peers {
		if !now[p] {
			close(q)
			delete(r.peers, p)
		}
	}
	for p := range now {
		if r.peers[p] == nil {
			q := make(chan []byte, relayQueue)
			r.peers[p] = q
			go r.sender(ctx, p, q)
		}
	}
}

func (r *Relay) sender(ctx context.Context, peer string, q <-chan []byte) {
	for {
		select {
		case <-ctx.Done():
			return
		case body, ok := <-q:
			if !ok {
				return
			}
			r.send(ctx, peer, body)
		}
	}
}

// Peers is host:port of every other control plane replica: the addresses the DNS name resolves
// to (a headless Service of the control plane pods), less this pod's own, at port.
func Peers(ctx context.Context, name string, port int) ([]string, error) {
	addrs, err := net.DefaultResolver.LookupHost(ctx, name)
	if err != nil {
		return nil, err
	}
	own := ownAddresses()
	var out []string
	for _, a := range addrs {
		if !own[a] {
			out = append(out, net.JoinHostPort(a, strconv.Itoa(port)))
		}
	}
	return out, nil
}

func ownAddresses() map[string]bool {
	own := map[string]bool{}
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			own[n.IP.String()] = true
		}
	}
	return own
}

func (r *Relay) send(ctx context.Context, peer string, body []byte) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+peer+"/v1/report", bytes.NewReader(body))
	if err != nil {
		return
	}
	req.Header.Set(RelayedHeader, "1")
	resp, err := r.Client.Do(req)
	if err != nil {
		r.Log.Debug("relaying a report", "peer", peer, "err", err)
		return
	}
	resp.Body.Close()
}

// Pass queues a report for every peer; a full queue drops it for that peer (counted): usage is
// cumulative, so the next report makes up for it, and only that report's decisions are lost.
func (r *Relay) Pass(body []byte) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, q := range r.peers {
		select {
		case q <- body:
		default:
			r.Dropped.Add(1)
		}
	}
}
