package redisclient

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Health is what a ping of the store found.
type Health struct {
	// Down lists the cluster primaries that did not answer, with why (cluster mode only: the
	// limits whose slots they serve fall back until a replica takes over).
	Down []string
}

// Ping asks the store whether it serves: the server, or the primary the sentinels name, or
// every cluster primary. It fails only when nothing can serve a report: a cluster missing some
// primaries still serves the limits whose slots the others hold (Health.Down names the rest),
// and an unready quota service would take those away too.
func Ping(ctx context.Context, rdb redis.UniversalClient) (Health, error) {
	cluster, ok := rdb.(*redis.ClusterClient)
	if !ok {
		return Health{}, rdb.Ping(ctx).Err()
	}
	var mu sync.Mutex
	var h Health
	answered := 0
	err := cluster.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		err := node.Ping(ctx).Err()
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			h.Down = append(h.Down, node.Options().Addr+": "+err.Error())
		} else {
			answered++
		}
		return nil
	})
	sort.Strings(h.Down)
	switch {
	case err != nil:
		return h, err
	case answered == 0 && len(h.Down) > 0:
		return h, fmt.Errorf("no cluster primary answers: %s", strings.Join(h.Down, "; "))
	case answered == 0:
		return h, errors.New("the cluster has no primaries")
	}
	return h, nil
}
