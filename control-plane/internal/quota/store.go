package quota

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// reportTTL is how long a replica's report counts: a replica that stopped reporting (gone, or
// cut off from the store) stops holding a share after it.
const reportTTL = 3 * time.Second

// Store keeps every replica's latest report per global limit in Redis: one hash per limit,
// a field per replica.
type Store struct {
	rdb redis.UniversalClient
}

// NewStore takes any of go-redis's clients: one server, a Sentinel-watched primary or a Cluster.
func NewStore(rdb redis.UniversalClient) *Store { return &Store{rdb: rdb} }

func hashKey(limitKey string) string { return "weighstation:quota:" + limitKey }

// Exchange records a replica's report under a limit and returns every live report, its own
// included, in one round trip.
func (s *Store) Exchange(ctx context.Context, limitKey string, r Report, now time.Time) ([]Report, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	key := hashKey(limitKey)
	pipe := s.rdb.TxPipeline()
	pipe.HSet(ctx, key, r.Replica, b)
	pipe.PExpire(ctx, key, 10*reportTTL)
	all := pipe.HGetAll(ctx, key)
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	var live []Report
	var stale []string
	for replica, v := range all.Val() {
		var rep Report
		if json.Unmarshal([]byte(v), &rep) != nil || now.Sub(time.UnixMilli(rep.At)) > reportTTL {
			stale = append(stale, replica)
			continue
		}
		live = append(live, rep)
	}
	if len(stale) > 0 {
		// Best effort: a stale report is ignored whether or not this removes it.
		s.rdb.HDel(ctx, key, stale...)
	}
	return live, nil
}
