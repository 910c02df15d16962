package main

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/weighstation/weighstation/helm/node/clientreport"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// kafkaProduce produces numbered records (the id as key) with franz-go's idempotent producer,
// retried until acknowledged or given up.
func kafkaProduce(o options, t *tally) error {
	id := o.clientID
	if id == "" {
		id = o.name
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(o.bootstrap), kgo.ClientID(id), kgo.DefaultProduceTopic(o.topic),
		kgo.RecordDeliveryTimeout(o.giveUp), kgo.ProducerLinger(0), kgo.AllowAutoTopicCreation(),
		kgo.WithHooks(learnBrokers{t}),
	}
	if o.batchBytes > 0 {
		opts = append(opts, kgo.ProducerBatchMaxBytes(int32(o.batchBytes)))
	}
	if o.user != "" {
		opts = append(opts, kgo.SASL(plain.Auth{User: o.user, Pass: o.password}.AsMechanism()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	payload := make([]byte, o.size)
	every(o.rate, o.duration, func(seq int) {
		t.add(func(r *clientreport.Report) { r.Sent++ })
		done := make(chan error, 1)
		cl.Produce(context.Background(), &kgo.Record{Key: fmt.Appendf(nil, "%s-%d", o.name, seq), Value: payload},
			func(_ *kgo.Record, err error) { done <- err })
		if err := <-done; err != nil {
			t.add(func(r *clientreport.Report) { r.GaveUp++ })
			return
		}
		t.ack(time.Now())
	})
	return nil
}

// learnBrokers records every broker address the client connects to: the seed and those Metadata
// responses named.
type learnBrokers struct{ t *tally }

func (l learnBrokers) OnBrokerConnect(meta kgo.BrokerMetadata, _ time.Duration, _ net.Conn, _ error) {
	l.t.learn(net.JoinHostPort(meta.Host, strconv.Itoa(int(meta.Port))))
}
