package usage

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/weighstation/weighstation/control-plane/internal/discovery"
)

// maxReport bounds a report's body: a worker sends its tenants' counters and at most a few
// thousand decisions.
const maxReport = 8 << 20

// maxFollowWait bounds how long GET /decisions?wait= holds a request open.
const maxFollowWait = 30 * time.Second

// Sinks are where a report an Envoy sent this control plane goes besides its Book (a relayed
// one goes nowhere else: the receiver passed it on).
type Sinks struct {
	// Relay passes it to the other control plane replicas (nil: none).
	Relay *Relay
	// OTLP sends its decisions to an OpenTelemetry collector (nil: none).
	OTLP *OTLP
	// Limits gives /usage each tenant's configured limits.
	Limits func(protocol, tenant string) (Limits, bool)
	// Brokers takes the Kafka brokers each report names, relayed ones too: every replica
	// fronts them alike (nil: none are discovered).
	Brokers func([]discovery.Seen, time.Time)
}

// Routes adds POST /v1/report, GET /usage, /usage/history and /decisions to mux.
func Routes(mux *http.ServeMux, b *Book, sinks Sinks) {
	limits := sinks.Limits
	mux.HandleFunc("POST /v1/report", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxReport))
		if err != nil {
			http.Error(w, "report: "+err.Error(), http.StatusBadRequest)
			return
		}
		var rep Report
		if err := json.Unmarshal(body, &rep); err != nil {
			http.Error(w, "unreadable report: "+err.Error(), http.StatusBadRequest)
			return
		}
		stored, needSince := b.Ingest(rep, time.Now())
		if sinks.Brokers != nil {
			sinks.Brokers(rep.Brokers, time.Now())
		}
		if r.Header.Get(RelayedHeader) == "" {
			sinks.Relay.Pass(body)
			sinks.OTLP.Add(stored)
		}
		if needSince {
			// Its decisions are recorded; its counters could not be: ask for its since (a filter
			// that does not know this answer sends the report again, and its decisions are not
			// recorded twice).
			w.WriteHeader(http.StatusResetContent)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /usage", func(w http.ResponseWriter, _ *http.Request) {
		var relayDropped uint64
		if sinks.Relay != nil {
			relayDropped = sinks.Relay.Dropped.Load()
		}
		sent, lost := sinks.OTLP.Counts()
		writeJSON(w, map[string]any{"at": time.Now().UTC(), "tenants": b.Now(time.Now(), limits),
			// What did not arrive where it should: decisions the filter workers dropped while their
			// reports did not get through, reports not relayed to a peer, decisions not delivered
			// to the OpenTelemetry collector.
			"lost": map[string]uint64{"workerDecisionsDropped": b.DroppedDecisions(), "reportsNotRelayed": relayDropped,
				"otlpDecisionsSent": sent, "otlpDecisionsLost": lost}})
	})
	// GET /usage/history?since=24h&format=csv|json|parquet[&resolution=1s]: per tenant and
	// minute, for chargeback (`weighstation usage export`), or per second (to replay).
	mux.HandleFunc("GET /usage/history", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		since := 24 * time.Hour
		if s := q.Get("since"); s != "" {
			d, err := time.ParseDuration(s)
			if err != nil {
				http.Error(w, "since: "+err.Error(), http.StatusBadRequest)
				return
			}
			since = d
		}
		format := q.Get("format")
		if format == "" {
			format = "csv"
		}
		types := map[string]string{"csv": "text/csv", "json": "application/x-ndjson", "parquet": "application/vnd.apache.parquet"}
		if types[format] == "" {
			http.Error(w, "format: want csv, json or parquet", http.StatusBadRequest)
			return
		}
		perSecond := false
		switch q.Get("resolution") {
		case "", "1m":
		case "1s":
			perSecond = true
		default:
			http.Error(w, "resolution: want 1m or 1s", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", types[format])
		_ = WriteHistory(w, format, b.History(time.Now().Add(-since), perSecond))
	})
	// GET /decisions?tenant=&protocol=&reason=&subject=&since=10m&after=SEQ&wait=10s
	// answers the matching decisions as JSON lines; with wait, a request that finds none holds
	// until some arrive (how `weighstation decisions --follow` follows without a busy poll).
	mux.HandleFunc("GET /decisions", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		f := Filter{Tenant: q.Get("tenant"), Protocol: q.Get("protocol"), Reason: q.Get("reason"), Subject: q.Get("subject")}
		if s := q.Get("since"); s != "" {
			d, err := time.ParseDuration(s)
			if err != nil {
				http.Error(w, "since: "+err.Error(), http.StatusBadRequest)
				return
			}
			f.SinceMs = time.Now().Add(-d).UnixMilli()
		}
		after := int64(-1)
		if s := q.Get("after"); s != "" {
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				http.Error(w, "after: "+err.Error(), http.StatusBadRequest)
				return
			}
			after = n
		}
		var wait time.Duration
		if s := q.Get("wait"); s != "" {
			d, err := time.ParseDuration(s)
			if err != nil {
				http.Error(w, "wait: "+err.Error(), http.StatusBadRequest)
				return
			}
			wait = min(d, maxFollowWait)
		}
		deadline := time.After(wait)
		for {
			arrived := b.Wait()
			found, last := b.Decisions(f, after)
			if len(found) > 0 || wait == 0 {
				w.Header().Set("Content-Type", "application/x-ndjson")
				w.Header().Set("X-Weighstation-Last-Seq", strconv.FormatInt(last, 10))
				enc := json.NewEncoder(w)
				for _, d := range found {
					_ = enc.Encode(d)
				}
				return
			}
			after = last
			select {
			case <-arrived:
			case <-deadline:
				wait = 0
			case <-r.Context().Done():
				return
			}
		}
	})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
