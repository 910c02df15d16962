package quota

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Standing is what the control plane last saw of the quota service (its /status "quota"): while
// it is down, every replica enforces each global limit ÷ the live replicas.
type Standing struct {
	Address   string    `json:"address"`
	Reachable bool      `json:"reachable"`
	Since     time.Time `json:"since"`
	LastError string    `json:"lastError,omitempty"`
	// Replicas is the count of connected Envoys pushed to the filters: what a replica divides a
	// global limit by without the service.
	Replicas int `json:"replicas"`
	// Enforcing says how replicas enforce global limits as far as the control plane can tell.
	Enforcing string `json:"enforcing"`
}

// Probe asks the quota service's /healthz (which pings Redis) once per period.
type Probe struct {
	// Target returns the service address and timeout in force (empty: no global tenants) and
	// the live replica count the filters were given.
	Target func() (address string, timeout time.Duration, replicas int)
	Client *http.Client

	mu       sync.Mutex
	standing *Standing
}

// Run probes until ctx ends.
func (p *Probe) Run(ctx context.Context, period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		p.once(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (p *Probe) once(ctx context.Context) {
	addr, timeout, replicas := p.Target()
	if addr == "" {
		p.mu.Lock()
		p.standing = nil
		p.mu.Unlock()
		return
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	errText := ""
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/healthz", nil)
	if err == nil {
		var resp *http.Response
		if resp, err = p.Client.Do(req); err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				errText = resp.Status + ": " + strings.TrimSpace(string(body))
			}
		}
	}
	if err != nil {
		errText = err.Error()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	reachable := errText == ""
	if p.standing == nil || p.standing.Reachable != reachable || p.standing.Address != addr {
		p.standing = &Standing{Address: addr, Reachable: reachable, Since: time.Now()}
	}
	p.standing.LastError = errText
	p.standing.Replicas = max(replicas, 1)
	p.standing.Enforcing = "shares from the quota service"
	if !reachable {
		p.standing.Enforcing = "limit ÷ " + strconv.Itoa(p.standing.Replicas) + " live replicas (fallback)"
	}
}

// Standing is the last probe's result; nil when no tenant is global.
func (p *Probe) Standing() *Standing {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.standing == nil {
		return nil
	}
	s := *p.standing
	return &s
}
