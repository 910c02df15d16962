package tenantfeed

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/weighstation/weighstation/control-plane/internal/compile"
)

// Hold is how long a poll is held when nothing changes: well inside the filter's 30 s timeout
// for the call, and often enough that a worker gone silent is soon seen gone.
const Hold = 20 * time.Second

// Poll is what a worker says of itself when it polls: the version it runs is acknowledged
// (see xds.NodeStatus) from here.
type Poll struct {
	Node, Worker, Applied string
	// Protocol: each protocol's filter is configured, and can fail to load, on its own.
	Protocol compile.Protocol
	Replicas int
	// At is when the poll began: with Node, Worker and Protocol it names the poll when it ends.
	At time.Time
	// Told is what the poll was answered, when it ends with a delta: the version the worker
	// runs from then on, and the replica count (0: the worker keeps its own).
	Told struct {
		Version  string
		Replicas int
	}
	// Abandoned: the worker hung up before an answer. Envoy dropped the root context that made
	// the poll: with its VM (as a short-lived instance on Envoy's main thread is), or the VM
	// polls again from another root context and is counted again then.
	Abandoned bool
}

// Tracker is told of each poll when it begins and when it ends (answered, or given up by the
// worker or the server).
type Tracker interface {
	Polled(Poll)
	PollEnded(Poll)
}

// Handler answers GET Path?protocol=P&applied=VERSION&replicas=N&node=ID&worker=TOKEN: the
// delta from that version as JSON (200), or 204 after Hold when there is none. Every poll is
// passed to polls as it begins and ends. Polls end when ctx does (the server's shutdown need not
// wait for them).
func Handler(ctx context.Context, f *Feed, polls Tracker) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		p := compile.Protocol(q.Get("protocol"))
		replicas, err := strconv.Atoi(q.Get("replicas"))
		if (p != compile.NATS && p != compile.Kafka) || err != nil || q.Get("applied") == "" {
			http.Error(w, "want protocol=nats|kafka, applied=VERSION and replicas=N", http.StatusBadRequest)
			return
		}
		poll := Poll{Node: q.Get("node"), Worker: q.Get("worker"), Applied: q.Get("applied"), Protocol: p, Replicas: replicas, At: time.Now()}
		polls.Polled(poll)
		defer func() { polls.PollEnded(poll) }() // with what it was told, if anything
		wait, cancel := context.WithTimeout(r.Context(), Hold)
		defer cancel()
		stop := context.AfterFunc(ctx, cancel)
		defer stop()
		d, ok := f.Wait(wait, p, q.Get("applied"), replicas)
		if !ok {
			poll.Abandoned = r.Context().Err() != nil && ctx.Err() == nil
			w.WriteHeader(http.StatusNoContent)
			return
		}
		poll.Told.Version, poll.Told.Replicas = d.Version, d.Replicas
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(d)
	})
}
