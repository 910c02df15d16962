package quota

import (
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

// storeDeadline bounds a request's time in Redis: a slow store is a store that is down, and the
// filter falls back rather than wait.
const storeDeadline = 500 * time.Millisecond

// SharesRequest is one replica's reports, one per global limit it carries traffic for.
type SharesRequest struct {
	Replica string        `json:"replica"`
	Limits  []LimitReport `json:"limits"`
}

// LimitReport is a Report under the limit named by Key, of PerSecond messages.
type LimitReport struct {
	Key         string  `json:"key"`
	PerSecond   float64 `json:"perSecond"`
	Admitted    float64 `json:"admitted"`
	Connections int     `json:"connections"`
	Saturated   bool    `json:"saturated"`
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
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil || req.Replica == "" {
		http.Error(w, fmt.Sprintf("bad shares request: %v", err), http.StatusBadRequest)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), storeDeadline)
	defer cancel()
	resp, err := s.shares(ctx, req)
	if err != nil {
		s.Log.Warn("quota store unavailable", "replica", req.Replica, "err", err)
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(resp)
}

func (s *Service) shares(ctx context.Context, req SharesRequest) (SharesResponse, error) {
	now := s.Now()
	var resp SharesResponse
	for _, l := range req.Limits {
		mine := Report{Replica: req.Replica, Admitted: l.Admitted, Connections: l.Connections, Saturated: l.Saturated, At: now.UnixMilli()}
		live, err := s.Store.Exchange(ctx, l.Key, mine, now)
		if err != nil {
			return resp, err
		}
		shares := Allocate(l.PerSecond, live)
		resp.Limits = append(resp.Limits, Share{Key: l.Key, Share: shares[req.Replica], Replicas: len(live)})
	}
	return resp, nil
}
