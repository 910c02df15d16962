package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weighstation/weighstation/helm/node/clientreport"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func connect(o options, t *tally) (*nats.Conn, error) {
	opts := []nats.Option{
		nats.Name(o.name), nats.MaxReconnects(-1), nats.ReconnectWait(100 * time.Millisecond),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			t.add(func(r *clientreport.Report) { r.Reconnects++ })
			t.learn(nc.Servers()...)
		}),
		nats.DiscoveredServersHandler(func(nc *nats.Conn) { t.learn(nc.DiscoveredServers()...) }),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			// The gateway refuses a message over the tenant's limit with a Permissions Violation,
			// the one -ERR nats.go survives.
			if errors.Is(err, nats.ErrPermissionViolation) || strings.Contains(err.Error(), "Permissions Violation") {
				t.add(func(r *clientreport.Report) { r.Refused++ })
				return
			}
			t.add(func(r *clientreport.Report) { r.Errors++ })
		}),
	}
	if o.user != "" {
		opts = append(opts, nats.UserInfo(o.user, o.password))
	}
	var nc *nats.Conn
	var err error
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if nc, err = nats.Connect(o.url, opts...); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", o.url, err)
	}
	t.learn(nc.Servers()...)
	return nc, nil
}

// natsJetStream publishes numbered messages, each with its Nats-Msg-Id retried until
// acknowledged (or given up), as a publisher that must lose and duplicate nothing does.
func natsJetStream(o options, t *tally) error {
	nc, err := connect(o, t)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	payload := make([]byte, o.size)
	every(o.rate, o.duration, func(seq int) {
		id := fmt.Sprintf("%s-%d", o.name, seq)
		t.add(func(r *clientreport.Report) { r.Sent++ })
		giveUp := time.Now().Add(o.giveUp)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_, err := js.Publish(ctx, o.subject, payload, jetstream.WithMsgID(id))
			cancel()
			if err == nil {
				t.ack(time.Now())
				return
			}
			if time.Now().After(giveUp) {
				t.add(func(r *clientreport.Report) { r.GaveUp++ })
				return
			}
			t.add(func(r *clientreport.Report) { r.Errors++ })
			time.Sleep(100 * time.Millisecond)
		}
	})
	return nil
}

// natsPublish sends plain publishes over several connections, each flushed so its refusal (if
// any) is back before the count: acknowledged is what the gateway did not refuse.
func natsPublish(o options, t *tally) error {
	conns := make([]*nats.Conn, o.connections)
	for i := range conns {
		nc, err := connect(o, t)
		if err != nil {
			return err
		}
		defer nc.Close()
		conns[i] = nc
	}
	payload := make([]byte, o.size)
	var next atomic.Uint64
	every(o.rate, o.duration, func(int) {
		nc := conns[next.Add(1)%uint64(len(conns))]
		t.add(func(r *clientreport.Report) { r.Sent++ })
		if err := nc.Publish(o.subject, payload); err != nil {
			t.add(func(r *clientreport.Report) { r.Errors++ })
		}
	})
	var wg sync.WaitGroup
	for _, nc := range conns {
		wg.Add(1)
		go func() { defer wg.Done(); _ = nc.FlushTimeout(10 * time.Second) }()
	}
	wg.Wait()
	time.Sleep(500 * time.Millisecond) // the last refusals' -ERR lines
	t.add(func(r *clientreport.Report) { r.Acked = r.Sent - r.Refused - r.Errors })
	return nil
}

// natsChurn is new clients arriving: each message on a connection of its own, made once with no
// retry and closed after the message is flushed. A connection refused, reset or not answered at
// its first try is counted with when and why: a user's client that fails to start.
func natsChurn(o options, t *tally) {
	payload := make([]byte, o.size)
	every(o.rate, o.duration, func(seq int) {
		t.add(func(r *clientreport.Report) { r.Sent++ })
		opts := []nats.Option{nats.Name(fmt.Sprintf("%s-%d", o.name, seq)), nats.NoReconnect(), nats.Timeout(5 * time.Second)}
		if o.user != "" {
			opts = append(opts, nats.UserInfo(o.user, o.password))
		}
		at := time.Now()
		nc, err := nats.Connect(o.url, opts...)
		if err == nil {
			t.learn(nc.Servers()...)
			err = nc.Publish(o.subject, payload)
			if err == nil {
				err = nc.FlushTimeout(5 * time.Second)
			}
			nc.Close()
		}
		if err != nil {
			t.add(func(r *clientreport.Report) {
				r.FirstTryFailures = append(r.FirstTryFailures, fmt.Sprintf("%s: %v", at.UTC().Format("15:04:05.000"), err))
			})
			return
		}
		t.ack(time.Now())
	})
}
