package main

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
)

// deliverySubject is where the delivery workload publishes, apart from the publish workload's.
const deliverySubject = "weighstation.cpu.delivered"

// deliveryStragglers is how long the subscriber may still be receiving after the publisher
// has sent everything: what nats-server and Envoy still buffer.
const deliveryStragglers = 30 * time.Second

// natsDeliver measures delivery to a subscriber connected to addr as `as`. The subscriber is
// `nats bench sub`'s own, in this process (a nats.go callback subscription without pending
// limits, timed from its first message to its last): unlike the command, it says when the
// server holds its interest (the flush after subscribing returns), and only then does the
// publisher start. The publisher is `nats bench pub` on nats-server itself as the baseline user,
// so Envoy carries the subscriber's traffic alone; nats-server stalls a publisher whose
// subscriber falls behind, so it publishes at the pace of the subscriber's path and the
// subscriber receives every message. Returns messages per second as the subscriber saw them.
func (s *suite) natsDeliver(ctx context.Context, addr string, as tenant, size, messages int) (float64, error) {
	var asyncErr atomic.Pointer[error]
	nc, err := nats.Connect("nats://"+addr, nats.Name("weighstation-cpu-subscriber"), nats.UserInfo(as.natsUser, as.natsPassword),
		nats.NoReconnect(), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { asyncErr.CompareAndSwap(nil, &err) }))
	if err != nil {
		return 0, fmt.Errorf("subscriber connecting to %s: %w", addr, err)
	}
	defer nc.Close()
	var received atomic.Int64
	var first, last time.Time
	done := make(chan struct{})
	sub, err := nc.Subscribe(deliverySubject, func(*nats.Msg) {
		n := received.Add(1)
		if n == 1 {
			first = time.Now()
		}
		if n == int64(messages) {
			last = time.Now()
			close(done)
		}
	})
	if err != nil {
		return 0, err
	}
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		return 0, err
	}
	if err := nc.Flush(); err != nil {
		return 0, fmt.Errorf("subscriber: %w", err)
	}
	if _, err := s.natsBench(ctx, s.stack.Addr("NATS_UPSTREAM_PORT"), deliverySubject, baseline, size, messages, false); err != nil {
		return 0, fmt.Errorf("publishing to the subscriber: %w", err)
	}
	select {
	case <-done:
	case <-time.After(deliveryStragglers):
		why := ""
		if e := asyncErr.Load(); e != nil {
			why = fmt.Sprintf(" (%v)", *e)
		}
		return 0, fmt.Errorf("the subscriber received %d of %d messages%s", received.Load(), messages, why)
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	if !last.After(first) {
		return 0, errors.New("the subscriber received every message at once: too few to time")
	}
	return float64(messages) / last.Sub(first).Seconds(), nil
}
