package localstack

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// kafkaStopGrace is how long a broker's controlled shutdown may take before it is killed: it
// waits for the controller to move its leaderships, seconds on a loopback cluster.
const kafkaStopGrace = 30 * time.Second

// kafkaView is what the stack reads of the cluster, over the DIRECT listeners as
// BaselineKafkaUser (the stack's own view, never a tenant's).
type kafkaView struct {
	brokers      map[int32]bool // registered, unfenced brokers by node.id
	quorumLeader int32          // the active controller, -1 while there is none
	partitions   []kafkaPartition
}

type kafkaPartition struct {
	topic               string
	partition, leader   int32
	replicas, inSyncSet []int32
}

// kafkaAdmin is a client seeded with every broker's DIRECT listener, so that it reaches the
// cluster while any one broker is down.
func (s *Stack) kafkaAdmin() (*kgo.Client, error) {
	seeds := make([]string, len(s.KafkaBrokers))
	for i := range seeds {
		seeds[i] = s.KafkaBrokerDirectAddr(i)
	}
	return kgo.NewClient(append(DirectKafka(seeds[0]), kgo.SeedBrokers(seeds...))...)
}

// readKafkaView asks one broker for the metadata of every topic and the quorum's state.
func readKafkaView(ctx context.Context, cl *kgo.Client) (kafkaView, error) {
	v := kafkaView{brokers: map[int32]bool{}, quorumLeader: -1}
	meta, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl) // no topics named: all of them
	if err != nil {
		return v, fmt.Errorf("metadata: %w", err)
	}
	for _, b := range meta.Brokers {
		v.brokers[b.NodeID] = true
	}
	for _, t := range meta.Topics {
		for _, p := range t.Partitions {
			v.partitions = append(v.partitions, kafkaPartition{topic: *t.Topic, partition: p.Partition, leader: p.Leader, replicas: p.Replicas, inSyncSet: p.ISR})
		}
	}
	q := kmsg.NewPtrDescribeQuorumRequest()
	qt := kmsg.NewDescribeQuorumRequestTopic()
	qt.Topic = "__cluster_metadata"
	qt.Partitions = []kmsg.DescribeQuorumRequestTopicPartition{kmsg.NewDescribeQuorumRequestTopicPartition()}
	q.Topics = append(q.Topics, qt)
	quorum, err := q.RequestWith(ctx, cl)
	if err != nil {
		return v, fmt.Errorf("describe quorum: %w", err)
	}
	if err := kerr.ErrorForCode(quorum.ErrorCode); err != nil {
		return v, fmt.Errorf("describe quorum: %w", err)
	}
	for _, t := range quorum.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode == 0 {
				v.quorumLeader = p.LeaderID
			}
		}
	}
	return v, nil
}

// waitKafka polls the cluster until ready says so. watched are the nodes whose exit for good
// ends the wait.
func (s *Stack) waitKafka(what string, watched []*process, timeout time.Duration, ready func(kafkaView) (bool, string)) error {
	cl, err := s.kafkaAdmin()
	if err != nil {
		return err
	}
	defer cl.Close()
	deadline := time.Now().Add(timeout)
	last := "no answer"
	for time.Now().Before(deadline) {
		for _, p := range watched {
			if p.exited() {
				return fmt.Errorf("%s exited before %s: %v", p.name, what, p.err)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		v, err := readKafkaView(ctx, cl)
		cancel()
		if err != nil {
			last = err.Error()
		} else if ok, why := ready(v); ok {
			return nil
		} else {
			last = why
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("not %s after %s: %s", what, timeout, last)
}

// waitKafkaCluster waits until want brokers are registered and the quorum has a leader.
func (s *Stack) waitKafkaCluster(want int, timeout time.Duration) error {
	return s.waitKafka(fmt.Sprintf("a Kafka cluster of %d brokers with an active controller", want), s.KafkaBrokers, timeout, func(v kafkaView) (bool, string) {
		return len(v.brokers) == want && v.quorumLeader >= 0,
			fmt.Sprintf("%d brokers registered %v, quorum leader %d", len(v.brokers), sortedIDs(v.brokers), v.quorumLeader)
	})
}

// WaitKafkaBroker waits until broker i is registered (unfenced) with an active controller and,
// with inSync, is in the ISR of every partition it replicates: caught up, as a rollout waits
// for under-replicated partitions to be none before the next broker. After KillKafkaBroker's
// release, wait for KafkaBrokerPID to change first.
func (s *Stack) WaitKafkaBroker(i int, inSync bool, timeout time.Duration) error {
	p, err := s.kafkaBroker(i)
	if err != nil {
		return err
	}
	id := s.KafkaBrokerID(i)
	what := fmt.Sprintf("broker %d registered", id)
	if inSync {
		what += " and in sync"
	}
	return s.waitKafka(what, []*process{p}, timeout, func(v kafkaView) (bool, string) {
		if !v.brokers[id] || v.quorumLeader < 0 {
			return false, fmt.Sprintf("brokers registered %v, quorum leader %d", sortedIDs(v.brokers), v.quorumLeader)
		}
		for _, pt := range v.partitions {
			if inSync && slices.Contains(pt.replicas, id) && !slices.Contains(pt.inSyncSet, id) {
				return false, fmt.Sprintf("%s/%d: replicas %v, ISR %v", pt.topic, pt.partition, pt.replicas, pt.inSyncSet)
			}
		}
		return true, ""
	})
}

// ReassignPartitions moves each partition of topic to its list of node.ids (KafkaBrokerID; the
// first is its preferred leader), as kafka-reassign-partitions does (AlterPartitionReassignments),
// and waits until every reassignment is complete: the replicas are exactly the new ones and all
// of them are in sync.
func (s *Stack) ReassignPartitions(topic string, partitionsToBrokers map[int32][]int32) error {
	cl, err := s.kafkaAdmin()
	if err != nil {
		return err
	}
	defer cl.Close()
	req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	req.TimeoutMillis = 30_000
	t := kmsg.NewAlterPartitionAssignmentsRequestTopic()
	t.Topic = topic
	for _, part := range slices.Sorted(maps.Keys(partitionsToBrokers)) {
		tp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
		tp.Partition, tp.Replicas = part, partitionsToBrokers[part]
		t.Partitions = append(t.Partitions, tp)
	}
	req.Topics = append(req.Topics, t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("reassigning %s: %w", topic, err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return fmt.Errorf("reassigning %s: %w%s", topic, err, message(resp.ErrorMessage))
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				return fmt.Errorf("reassigning %s/%d: %w%s", topic, rp.Partition, err, message(rp.ErrorMessage))
			}
		}
	}
	return s.waitKafka("reassigned", nil, kafkaStartTimeout, func(v kafkaView) (bool, string) {
		for _, pt := range v.partitions {
			want, ok := partitionsToBrokers[pt.partition]
			if pt.topic != topic || !ok {
				continue
			}
			if !sameIDs(pt.replicas, want) || !sameIDs(pt.inSyncSet, want) {
				return false, fmt.Sprintf("%s/%d: replicas %v, ISR %v, want %v", topic, pt.partition, pt.replicas, pt.inSyncSet, want)
			}
		}
		return true, ""
	})
}

// ElectPreferredLeaders makes each partition of topic led by its preferred replica (the first),
// as kafka-leader-election --election-type PREFERRED does, and waits until the metadata says so.
// A partition already led by it is fine; one whose preferred replica is out of sync is an error.
func (s *Stack) ElectPreferredLeaders(topic string) error {
	cl, err := s.kafkaAdmin()
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	v, err := readKafkaView(ctx, cl)
	if err != nil {
		return err
	}
	t := kmsg.NewElectLeadersRequestTopic()
	t.Topic = topic
	for _, pt := range v.partitions {
		if pt.topic == topic {
			t.Partitions = append(t.Partitions, pt.partition)
		}
	}
	if len(t.Partitions) == 0 {
		return fmt.Errorf("electing leaders: no topic %s", topic)
	}
	req := kmsg.NewPtrElectLeadersRequest()
	req.ElectionType, req.TimeoutMillis = 0, 30_000 // 0: preferred
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("electing leaders of %s: %w", topic, err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return fmt.Errorf("electing leaders of %s: %w", topic, err)
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil && err != kerr.ElectionNotNeeded {
				return fmt.Errorf("electing the leader of %s/%d: %w%s", topic, rp.Partition, err, message(rp.ErrorMessage))
			}
		}
	}
	return s.waitKafka("led by preferred replicas", nil, startTimeout, func(v kafkaView) (bool, string) {
		for _, pt := range v.partitions {
			if pt.topic == topic && len(pt.replicas) > 0 && pt.leader != pt.replicas[0] {
				return false, fmt.Sprintf("%s/%d: leader %d, replicas %v", topic, pt.partition, pt.leader, pt.replicas)
			}
		}
		return true, ""
	})
}

func message(m *string) string {
	if m == nil || *m == "" {
		return ""
	}
	return ": " + *m
}

func sortedIDs(set map[int32]bool) []int32 { return slices.Sorted(maps.Keys(set)) }

// sameIDs: the same node.ids, in any order.
func sameIDs(a, b []int32) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
