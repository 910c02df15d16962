"""Drives librdkafka (confluent-kafka for Python) as a consumer-group member reading a topic from
its start, as its users run it (subscribe, poll, automatic commits), until it has N records or
the deadline passes, and prints one JSON object for the e2e read-side tests to parse:

    {"records": [[seconds since the epoch received, partition, offset, key + value bytes], ...],
     "rebalances": N}

rebalances counts assignments after the first and every revocation or loss before the probe
closes (closing revokes the assignment itself).

Usage: consumer_probe.py bootstrap topic group clientId records deadlineSeconds
"""

import json
import sys
import time

from confluent_kafka import Consumer


def main():
    bootstrap, topic, group, client_id = sys.argv[1:5]
    want, deadline = int(sys.argv[5]), time.time() + float(sys.argv[6])
    events = {"assigned": 0, "revoked": 0}

    def assigned(_consumer, _partitions):
        events["assigned"] += 1

    def revoked(_consumer, _partitions):
        events["revoked"] += 1

    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "client.id": client_id,
        "group.id": group,
        "auto.offset.reset": "earliest",
    })
    consumer.subscribe([topic], on_assign=assigned, on_revoke=revoked, on_lost=revoked)
    records = []
    while len(records) < want and time.time() < deadline:
        message = consumer.poll(0.5)
        if message is None:
            continue
        if message.error():
            print(f"consumer error: {message.error()}", file=sys.stderr)
            continue
        size = len(message.key() or b"") + len(message.value() or b"")
        records.append([time.time(), message.partition(), message.offset(), size])
    rebalances = events["revoked"] + max(events["assigned"] - 1, 0)
    consumer.close()
    print(json.dumps({"records": records, "rebalances": rebalances}))


if __name__ == "__main__":
    main()
