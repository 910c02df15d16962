package quota

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"time"
)

// SharesPath is where a replica's filter posts its reports (from Envoy's root context, about
// once a second, never per message).
const SharesPath = "/v1/shares"

// storeDeadline bounds each of a request's two round trips to Redis (the reports, then the
// shares; together the filter's default timeout, 500 ms), so that a node that does not answer
// costs its own limits and not the others' second trip: a slow store is a store that is down,
// and the filter falls back rather than wait.
const storeDeadline = 250 * time.Millisecond

// maxRequestBytes bounds a report's body: about 150 bytes a limit, so some 100,000 limits.
const maxRequestBytes = 16 << 20

// SharesRequest is one replica's reports, one per global limit it carries traffic for.
type SharesRequest struct {
	Replica string `json:"replica"`
	// Replicas is how many live gateway replicas the filter was told of (0 from a filter older
	// than this field: then only those that reported count).
	Replicas int           `json:"replicas,omitempty"`
	Limits   []LimitReport `json:"limits"`
}

// LimitReport is a Report under the limit named by Key, of PerSecond units.
type LimitReport struct {
	Key       string  `json:"key"`
	PerSecond float64 `json:"perSecond"`
	Admitted  float64 `json:"admitted"`
	// Demand is absent from a filter older than demand-based shares (a rollout's few seconds):
	// it is taken as what it admitted, or the whole limit if it was held back.
	Demand      *float64 `json:"demand,omitempty"`
	Connections int      `json:"connections"`
	Saturated   bool     `json:"saturated"`
}

func (l LimitReport) demand() float64 {
	switch {
	case l.Demand != nil:
		return *l.Demand
	case l.Saturated:
		return l.PerSecond
	default:
		return l.Admitted
	}
}

// SharesResponse is the replica's share of each limit and how many replicas hold one.
type SharesResponse struct {
	Limits []Share `json:"limits"`
}

type Share struct {
	Key      string  `json:"key"`
	Share    float64 `json:"share"`
	Replicas int     `json:"replicas"`
}

// Service answers SharesPath from a Store.
type Service struct {
	Store *Store
	Log   *slog.Logger
	Now   func() time.Time
}

func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != SharesPath || r.Method != http.MethodPost {
		http.Error(w, "POST "+SharesPath, http.StatusNotFound)
		return
	}
	var req SharesRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxRequestBytes)).Decode(&req); err != nil || req.Replica == "" {
		http.Error(w, fmt.Sprintf("bad shares request: %v", err), http.StatusBadRequest)
		return
	}
	resp, err := s.shares(r.Context(), req)
	if err != nil {
		s.Log.Warn("quota store unavailable", "replica", req.Replica, "err", err)
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(resp)
}

// shares answers every limit the store could reach; a limit it could not (a Cluster primary
// lost) is left out of the answer, and that replica's share of it lapses into the fallback
// (limit ÷ replicas) while the others keep theirs. Only when no limit could be answered is the
// request an error.
func (s *Service) shares(ctx context.Context, req SharesRequest) (SharesResponse, error) {
	now := s.Now()
	var resp SharesResponse
	if len(req.Limits) == 0 {
		return resp, nil
	}
	keys := make([]string, len(req.Limits))
	reports := make([]Report, len(req.Limits))
	for i, l := range req.Limits {
		keys[i] = l.Key
		reports[i] = Report{Replica: req.Replica, Admitted: l.Admitted, Demand: l.demand(), Connections: l.Connections, Saturated: l.Saturated, At: now.UnixMilli()}
	}
	exchange, cancel := context.WithTimeout(ctx, storeDeadline)
	live, failed := s.Store.Exchange(exchange, keys, reports, now)
	cancel()
	var reached []int
	var due []float64
	for i, l := range req.Limits {
		if failed[i] == nil {
			reached = append(reached, i)
			due = append(due, Allocate(l.PerSecond, live[i], max(req.Replicas, len(live[i])))[req.Replica])
		}
	}
	reachedKeys := make([]string, len(reached))
	for j, i := range reached {
		reachedKeys[j] = keys[i]
	}
	grant, cancel := context.WithTimeout(ctx, storeDeadline)
	given, grantFailed := s.Store.Grant(grant, req.Replica, reachedKeys, due, now)
	cancel()
	var firstErr error
	for _, err := range failed {
		firstErr = cmp.Or(firstErr, err)
	}
	for j, i := range reached {
		if grantFailed[j] != nil {
			firstErr = cmp.Or(firstErr, grantFailed[j])
			continue
		}
		resp.Limits = append(resp.Limits, Share{Key: keys[i], Share: given[j], Replicas: len(live[i])})
	}
	if len(resp.Limits) == 0 {
		return resp, firstErr
	}
	if missing := len(req.Limits) - len(resp.Limits); missing > 0 {
		s.Log.Warn("quota store unreachable for some limits", "replica", req.Replica, "limits", missing, "answered", len(resp.Limits), "err", firstErr)
	}
	return resp, nil
}
