"""Drives librdkafka (confluent-kafka for Python, as its users run it: acks=all, retries until
message.timeout.ms, up to a million requests in flight) open loop at a fixed record rate for a while, and prints one line of
outcomes for the e2e conformance tests to parse:

    sent=N acked=N failed=N errors=NAME:count,... first_ack_ms=N last_ack_ms=N

Every message's delivery report is counted, by librdkafka's error name (e.g.
THROTTLING_QUOTA_EXCEEDED). The first report of each error name goes to stderr, as the
application would log it.

Usage: producer_probe.py bootstrap topic clientId recordsPerSecond seconds recordBytes deliveryTimeoutMs
"""

import json
import os
import sys
import time

from confluent_kafka import KafkaException, Producer


def main():
    bootstrap, topic, client_id = sys.argv[1:4]
    rate, seconds, size = float(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6])
    delivery_timeout_ms = int(sys.argv[7])
    producer = Producer({
        "bootstrap.servers": bootstrap,
        "client.id": client_id,
        "acks": "all",
        # librdkafka's default batch.size is 1,000,000 bytes: under load its batches grow past
        # the tenant's maxMessageBytes (64 KiB) and are refused as MESSAGE_TOO_LARGE. 16 KiB is
        # the Java producer's default, and holds ~30 records of 500 B: under the tenant's burst.
        "batch.size": 16384,
        # delivery.timeout.ms: how long a message may wait for delivery before it is reported
        # failed (default 300 s).
        "message.timeout.ms": delivery_timeout_ms,
        # PROBE_CONF: more configuration as a JSON object (security settings).
        **(json.loads(os.environ.get("PROBE_CONF", "{}")) or {}),
    })
    acked = failed = 0
    first_ack = last_ack = -1
    errors = {}
    # The schedule starts once the client has its metadata: a schedule that starts while the
    # client cannot send yet offers its backlog at once, over a tenant's burst.
    producer.list_topics(topic, timeout=10)
    start = time.monotonic()

    def report(err, msg):
        nonlocal acked, failed, first_ack, last_ack
        if err is None:
            at = int((time.monotonic() - start) * 1000)
            acked += 1
            if first_ack < 0:
                first_ack = at
            last_ack = at
            return
        failed += 1
        name = err.name()
        if name not in errors:
            print("first %s: %s" % (name, err.str()), file=sys.stderr, flush=True)
        errors[name] = errors.get(name, 0) + 1

    total = int(rate * seconds)
    for n in range(total):
        # Open loop: each record at its planned time, whatever the producer did before.
        wait = start + n / rate - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        value = ("%s-%d" % (client_id, n)).encode().ljust(size, b"\0")
        try:
            producer.produce(topic, value, partition=0, on_delivery=report)
        except KafkaException as e:
            # Refused by librdkafka itself (a topic its metadata says it may not write to).
            report(e.args[0], None)
        producer.poll(0)  # serves delivery reports as they arrive
    producer.flush()
    summary = ",".join("%s:%d" % kv for kv in sorted(errors.items()))
    print("sent=%d acked=%d failed=%d errors=%s first_ack_ms=%d last_ack_ms=%d"
          % (total, acked, failed, summary, first_ack, last_ack))


if __name__ == "__main__":
    main()
