"""Drives librdkafka (confluent-kafka for Python) as an idempotent producer
(enable.idempotence=true: acks=all, retries until message.timeout.ms) open loop at a fixed
record rate across every partition of a topic (record n keyed "n", value "<clientId>-<n>"), and
reports what its client saw: one line

    sent=N acked=N failed=N errors=NAME:count,... refused=N

on stdout, every acknowledged record's value, one per line, into a file, and every value
reported refused into that file + ".refused".

librdkafka does not retry the gateway's refusal (THROTTLING_QUOTA_EXCEEDED, docs/kafka.md
"Retries"): it reports each refused record in its delivery report, counted as `refused`, not
`failed`, and a refused record must never be stored.

Usage: cluster_producer.py bootstrap topic clientId recordsPerSecond seconds ackedFile
"""

import sys
import time

from confluent_kafka import KafkaError, Producer


def main():
    bootstrap, topic, client_id = sys.argv[1:4]
    rate, seconds, acked_file = float(sys.argv[4]), float(sys.argv[5]), sys.argv[6]
    producer = Producer({
        "bootstrap.servers": bootstrap,
        "client.id": client_id,
        "enable.idempotence": True,
        # Small batches, as the Java and franz-go producers of these tests (verify_test.go
        # oneRequest): the gateway decides a request whole.
        "batch.size": 1024,
        "linger.ms": 5,
        "message.timeout.ms": 180000,
    })
    acked = []
    failed = 0
    errors = {}
    refused = []
    producer.list_topics(topic, timeout=30)
    print("cluster_producer: started", file=sys.stderr, flush=True)
    start = time.monotonic()

    def report(err, msg):
        nonlocal failed
        if err is None:
            acked.append(msg.value().decode())
            return
        if err.code() == KafkaError.THROTTLING_QUOTA_EXCEEDED:
            refused.append(msg.value().decode())
            return
        name = err.name()
        if name not in errors:
            print("first %s: %s" % (name, err.str()), file=sys.stderr, flush=True)
        errors[name] = errors.get(name, 0) + 1
        failed += 1

    total = int(rate * seconds)
    for n in range(total):
        wait = start + n / rate - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        producer.produce(topic, ("%s-%d" % (client_id, n)).encode(), key=str(n).encode(), on_delivery=report)
        producer.poll(0)
    # message.timeout.ms reports every record within 180 s; a client wedged past it is shown.
    left = producer.flush(240)
    if left:
        print("cluster_producer: %d records unanswered 240 s after the run" % left, file=sys.stderr, flush=True)
    with open(acked_file, "w") as f:
        for v in acked:
            f.write(v + "\n")
    with open(acked_file + ".refused", "w") as f:
        for v in refused:
            f.write(v + "\n")
    summary = ",".join("%s:%d" % kv for kv in sorted(errors.items()))
    print("sent=%d acked=%d failed=%d errors=%s refused=%d" % (total, len(acked), failed, summary, len(refused)))


if __name__ == "__main__":
    main()
