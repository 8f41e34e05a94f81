"""Produce throughput through the Kafka listener with a real Kafka client (kafka-python or
confluent-kafka), beside `kraftlab bench produce` (native client).

Method: the same fresh cluster and RF-3 topic as `bench produce` (harness/bench/data_cluster.py:
`--controllers` 1, `--brokers` 3, `--partitions` 1 by default). One idempotent
producer of `--client` in this process sends `--records` records of `--record-size` random bytes
round-robin over the partitions as fast as it can, for each `--acks` value (linger.ms 5). A
warm-up of 10% of the records is sent and flushed first by the same producer and not counted.
Throughput = records acknowledged / wall time from the first send to the last acknowledgement
(MB = 2^20 bytes of record values). Every delivery must succeed, or the run fails.
CPU seconds of the node processes and of this client are reported as in `bench produce`.
The clients are test dependencies (pyproject `dev`): this benchmark needs them installed.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from typing import Any

from harness.bench import spy
from harness.bench.data_cluster import ACK_NAMES, ACKS, add_common, client_cpu, data_cluster
from harness.bench.quorum import cluster_cpu
from harness.launcher import cluster as cl

CLIENTS = ("confluent-kafka", "kafka-python")
POLL_EVERY = 1000  # confluent-kafka: serve (error) delivery reports every this many sends


def bootstrap(cluster: cl.ClusterFile) -> str:
    return ",".join(f"{n.host}:{n.kafka_port}" for n in cluster.brokers if n.kafka_port)


Send = Callable[[str, list[bytes], int], int]


def confluent_sender(servers: str, acks: int) -> tuple[Send, Callable[[], None]]:
    """librdkafka through confluent-kafka: one Producer for the warm-up and the measured run
    (as the native client's). Delivery reports only for failures (`delivery.report.only.error`,
    one producer-wide callback), served by a poll every POLL_EVERY sends, and `flush` at the end:
    what is counted is librdkafka and the brokers, not a Python callback per record."""
    from confluent_kafka import Producer

    errors: list[Any] = []

    def report(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(err)

    producer = Producer({"bootstrap.servers": servers, "acks": str(acks), "linger.ms": 5,
                         "enable.idempotence": acks == -1, "delivery.report.only.error": True,
                         "on_delivery": report})  # fmt: skip
    produce, poll = producer.produce, producer.poll

    def send(topic: str, values: list[bytes], partitions: int) -> int:
        for i, v in enumerate(values):
            while True:
                try:
                    produce(topic, v, partition=i % partitions)
                    break
                except BufferError:  # queue.buffering.max.messages reached: wait for acks
                    poll(0.001)
            if i % POLL_EVERY == 0:
                poll(0)
        if producer.flush(300) != 0 or errors:
            raise RuntimeError(f"confluent-kafka: {len(errors)} deliveries failed: {errors[:3]}")
        return len(values)

    return send, lambda: None


def kafka_python_sender(servers: str, acks: int) -> tuple[Send, Callable[[], None]]:
    from kafka import KafkaProducer  # type: ignore[import-untyped]

    producer = KafkaProducer(bootstrap_servers=servers, acks=acks if acks != -1 else "all",
                             linger_ms=5, enable_idempotence=acks == -1)  # fmt: skip

    def send(topic: str, values: list[bytes], partitions: int) -> int:
        futures = [producer.send(topic, value=v, partition=i % partitions)
                   for i, v in enumerate(values)]  # fmt: skip
        producer.flush(300)
        for f in futures:
            f.get(timeout=30)
        return len(values)

    return send, lambda: producer.close(10)


def produce_run(
    cluster: cl.ClusterFile, topic: str, acks: int, args: argparse.Namespace
) -> dict[str, Any]:
    """One producer, warmed up with 10% of the records, then measured (as bench produce)."""
    factory = confluent_sender if args.client == "confluent-kafka" else kafka_python_sender
    send, close = factory(bootstrap(cluster), acks)
    try:
        warmup = [os.urandom(args.record_size) for _ in range(max(1, args.records // 10))]
        send(topic, warmup, args.partitions)
        values = [os.urandom(args.record_size) for _ in range(args.records)]
        samplers = spy.start(cluster, args, f"{args.client}-acks{ACK_NAMES[acks]}")
        cpu0, client0 = cluster_cpu(cluster), client_cpu()
        started = time.monotonic()
        count = send(topic, values, args.partitions)
        elapsed = time.monotonic() - started
        cpu1, client1 = cluster_cpu(cluster), client_cpu()
        spy.finish(samplers, args, f"{args.client}-acks{ACK_NAMES[acks]}")
    finally:
        close()
    return {"client": args.client, "acks": {1: "1", -1: "all", 0: "0"}[acks], "records": count,
            "record_bytes": args.record_size, "elapsed_s": round(elapsed, 3),
            "records_per_s": round(count / elapsed),
            "mb_per_s": round(count * args.record_size / elapsed / 2**20, 2),
            "node_cpu_s": round(sum(cpu1.values()) - sum(cpu0.values()), 2), "client_cpu_s": round(client1 - client0, 2)}  # fmt: skip


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_common(parser)
    parser.add_argument("--client", choices=CLIENTS, default="confluent-kafka")
    parser.add_argument("--acks", default="1,all", help="comma-separated: 0, 1, all")
    spy.add_arguments(parser)


def run(args: argparse.Namespace) -> int:
    acks_list = [ACKS[a.strip()] for a in args.acks.split(",")]
    topic = "bench"
    results = []
    with data_cluster(args, topic) as cluster:
        for acks in acks_list:
            r = produce_run(cluster, topic, acks, args)
            results.append(r)
            if not args.json:
                print(f"kafka-produce {r['client']} acks={r['acks']}: {r['records']} x "
                      f"{r['record_bytes']} B in {r['elapsed_s']} s = {r['records_per_s']} "
                      f"records/s, {r['mb_per_s']} MB/s; CPU s: nodes {r['node_cpu_s']}, "
                      f"client {r['client_cpu_s']}", flush=True)  # fmt: skip
    if args.json:
        print(json.dumps({"bench": "kafka-produce", "brokers": args.brokers,
                          "partitions": args.partitions, "runs": results}))  # fmt: skip
    return 0
