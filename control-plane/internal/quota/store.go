package quota

import (
	"cmp"
	"context"
	_ "embed"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// reportTTL is how long a replica's report and the share it was given count: a replica that
// stopped reporting (gone, or cut off from the store) stops holding a share after it. The
// filter lets a share lapse sooner (weighstation_core::quota::SHARE_TTL_NS, 2.5 s), so the
// store never counts a share as free that a replica may still enforce.
const reportTTL = 3 * time.Second

// Store keeps, in Redis, one hash per global limit: each replica's latest report (field
// report/<replica>) and the share it was last given (grant/<replica>). One key per limit keeps
// every step on one slot of a Redis Cluster.
type Store struct {
	rdb redis.UniversalClient
}

// NewStore takes any of go-redis's clients: one server, a Sentinel-watched primary or a Cluster.
func NewStore(rdb redis.UniversalClient) *Store { return &Store{rdb: rdb} }

func hashKey(limitKey string) string { return "weighstation:quota:" + limitKey }

const (
	reportField = "report/"
	grantField  = "grant/"
)

// grantScript gives a replica the share it is due, capped by what the other replicas were
// given and may still hold, atomically on the limit's hash: so the shares in force never sum
// above the limit, whatever order replicas report in. A share one replica no longer needs
// comes free when that replica next reports, and the one that needs it gets it at its own next
// report: within two report periods.
//
//go:embed grant.lua
var grantSource string

var grantScript = redis.NewScript(grantSource)

// Exchange records a replica's reports, one per limit, and returns every live report under
// each of those limits, its own included: one pipelined round trip for them all. A limit whose
// key could not be reached (in a Cluster, one whose primary is lost) has an error of its own;
// the others are answered.
func (s *Store) Exchange(ctx context.Context, limitKeys []string, reports []Report, now time.Time) ([][]Report, []error) {
	pipe := s.rdb.Pipeline()
	type sent struct {
		set    *redis.IntCmd
		expire *redis.BoolCmd
		all    *redis.MapStringStringCmd
	}
	cmds := make([]sent, len(limitKeys))
	for i, limitKey := range limitKeys {
		key := hashKey(limitKey)
		cmds[i] = sent{pipe.HSet(ctx, key, reportField+reports[i].Replica, reports[i].encode()), pipe.PExpire(ctx, key, 10*reportTTL), pipe.HGetAll(ctx, key)}
	}
	_, _ = pipe.Exec(ctx) // each command's own error is read below
	live := make([][]Report, len(limitKeys))
	errs := make([]error, len(limitKeys))
	stale := s.rdb.Pipeline()
	for i, c := range cmds {
		if err := cmp.Or(c.set.Err(), c.expire.Err(), c.all.Err()); err != nil {
			errs[i] = fmt.Errorf("redis: %w", err)
			continue
		}
		var gone []string
		for field, v := range c.all.Val() {
			replica, isReport := strings.CutPrefix(field, reportField)
			rep, readable := decodeReport(replica, v)
			switch {
			case isReport && readable && now.Sub(time.UnixMilli(rep.At)) <= reportTTL:
				live[i] = append(live[i], rep)
			case isReport:
				gone = append(gone, field, grantField+replica)
			case !strings.HasPrefix(field, grantField):
				gone = append(gone, field) // not ours: an earlier release's layout
			}
		}
		if len(gone) > 0 {
			stale.HDel(ctx, hashKey(limitKeys[i]), gone...)
		}
	}
	// Best effort: a stale report is ignored, and its share not counted, whether or not this
	// removes them.
	if stale.Len() > 0 {
		_, _ = stale.Exec(ctx)
	}
	return live, errs
}

// Grant records each share a replica is due (a fraction of the limit), capped as grantScript
// says, and returns the shares it was given: one pipelined round trip. As with Exchange, a
// limit whose key could not be reached has an error of its own.
func (s *Store) Grant(ctx context.Context, replica string, limitKeys []string, due []float64, now time.Time) ([]float64, []error) {
	run := func(send bool) []*redis.Cmd {
		pipe := s.rdb.Pipeline()
		cmds := make([]*redis.Cmd, len(limitKeys))
		for i, limitKey := range limitKeys {
			keys := []string{hashKey(limitKey)}
			args := []any{replica, strconv.FormatFloat(due[i], 'f', 6, 64), now.UnixMilli(), reportTTL.Milliseconds()}
			if send {
				cmds[i] = grantScript.Eval(ctx, pipe, keys, args...)
			} else {
				cmds[i] = grantScript.EvalSha(ctx, pipe, keys, args...)
			}
		}
		_, _ = pipe.Exec(ctx)
		return cmds
	}
	cmds := run(false)
	if slices.ContainsFunc(cmds, func(c *redis.Cmd) bool { return redis.HasErrorPrefix(c.Err(), "NOSCRIPT") }) {
		// A server that has not seen the script yet (the first call, or a new primary after a
		// failover): send it whole.
		cmds = run(true)
	}
	granted := make([]float64, len(cmds))
	errs := make([]error, len(cmds))
	for i, c := range cmds {
		text, err := c.Text()
		if err == nil {
			granted[i], err = strconv.ParseFloat(text, 64)
		}
		if err != nil {
			errs[i] = fmt.Errorf("redis: share of %s: %w", limitKeys[i], err)
		}
	}
	return granted, errs
}

// A report is kept as "r1 <admitted> <demand> <connections> <saturated 0|1> <at ms>": every
// replica's answer reads back every other replica's report under each of its limits, and
// decoding JSON there was 43% of the service's CPU at 100 replicas (make bench-quota).
const reportVersion = "r1"

func (r Report) encode() string {
	saturated := "0"
	if r.Saturated {
		saturated = "1"
	}
	return strings.Join([]string{reportVersion, strconv.FormatFloat(r.Admitted, 'g', -1, 64), strconv.FormatFloat(r.Demand, 'g', -1, 64),
		strconv.Itoa(r.Connections), saturated, strconv.FormatInt(r.At, 10)}, " ")
}

// decodeReport reads a report kept by encode; false for anything else (an earlier release's
// layout, which then counts as stale).
func decodeReport(replica, v string) (Report, bool) {
	f := strings.Fields(v)
	if len(f) != 6 || f[0] != reportVersion {
		return Report{}, false
	}
	r := Report{Replica: replica, Saturated: f[4] == "1"}
	var errs [4]error
	r.Admitted, errs[0] = strconv.ParseFloat(f[1], 64)
	r.Demand, errs[1] = strconv.ParseFloat(f[2], 64)
	r.Connections, errs[2] = strconv.Atoi(f[3])
	r.At, errs[3] = strconv.ParseInt(f[5], 10, 64)
	return r, errs == [4]error{}
}
