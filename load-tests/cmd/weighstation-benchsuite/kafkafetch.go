package main

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The Fetch driver: a consumer's requests on one pinned connection (as the Produce driver, so
// that tcp_proxy is a baseline), one Fetch at a time as a consumer sends them, each reading
// partition 0 of fetchTopic from its start: the broker answers from its page cache with
// maxBytes of records, and the filter walks each response's headers.
const (
	// fetchVersion is the newest Fetch version the filter parses (v13 names topics by id).
	fetchVersion = 12
	fetchTopic   = "weighstation-cpu-fetch"
	// fetchBacklog is what fetchTopic holds: more than the largest Fetch asks for.
	fetchBacklog = 2 << 20
)

// fetchTopicFilled writes fetchBacklog bytes of 1 KiB records to fetchTopic through addr as
// acme, once per suite (the topic keeps them), in batches of 16 KiB: the smallest Fetch's size
// (a broker answers with a first batch whole, whatever the Fetch asks for).
func (s *suite) fetchTopicFilled(ctx context.Context, addr string) error {
	if s.fetchFilled {
		return nil
	}
	const records, size = 16, 1 << 10
	_, err := produceOnOneConnection(ctx, addr, acme.kafkaClientID, fetchTopic, records, size, fetchBacklog/(records*size))
	s.fetchFilled = err == nil
	return err
}

// fetchOnOneConnection sends `requests` Fetch requests to addr as clientID, each for maxBytes of
// partition 0 from offset 0, checks that each answers with records and no error, and returns
// fetches per second.
func fetchOnOneConnection(ctx context.Context, addr, clientID string, maxBytes, requests int) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	k, err := openPinned(ctx, addr, clientID, fetchTopic, 1<<20)
	if err != nil {
		return 0, err
	}
	defer k.conn.Close()
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = fetchVersion, -1, 0, 1, int32(maxBytes)
	req.SessionEpoch = -1
	part := kmsg.NewFetchRequestTopicPartition()
	part.Partition, part.FetchOffset, part.PartitionMaxBytes = 0, 0, int32(maxBytes)
	req.Topics = []kmsg.FetchRequestTopic{{Topic: fetchTopic, Partitions: []kmsg.FetchRequestTopicPartition{part}}}
	start := time.Now()
	for i := range requests {
		id := int32(i + 1)
		if _, err := k.conn.Write(k.format.AppendRequest(nil, req, id)); err != nil {
			return 0, err
		}
		if err := k.fetched(id); err != nil {
			return 0, fmt.Errorf("fetch %d of %d: %w", i+1, requests, err)
		}
	}
	return float64(requests) / time.Since(start).Seconds(), nil
}

// fetched reads the next response, which must answer correlation id `id` with records and no
// error.
func (k *kafkaConn) fetched(id int32) error {
	body, err := k.response(id, true) // Fetch v12 responses have a flexible header
	if err != nil {
		return err
	}
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = fetchVersion
	if err := resp.ReadFrom(body); err != nil {
		return fmt.Errorf("fetch response: %w", err)
	}
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return fmt.Errorf("fetch response: error %d, %d topics", resp.ErrorCode, len(resp.Topics))
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
		return fmt.Errorf("partition 0: error %d, %d bytes of records", p.ErrorCode, len(p.RecordBatches))
	}
	return nil
}
