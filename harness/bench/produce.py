"""Produce throughput and latency: 3 brokers, RF 3, one producer, 100-byte records, acks=1 and all.

`--replication-mode isr,quorum,raft` measures the modes side by side in ONE run: one topic per
mode in the same cluster (`bench-<mode>`, replication.mode=<mode>), each measured in turn with
every `--acks`, and a table at the end (records/s, p50/p99 latency, broker CPU per record = CPU
time of the three broker processes over the measured records, in microseconds).

Method: a fresh cluster (`--controllers`, default 1, and `--brokers`, default 3, on 127.0.0.1, the
same launcher as `kraftlab cluster up`) with one topic of `--partitions` (default 1) partitions
and replication factor 3. One harness.client Producer in this process (native msgpack protocol,
idempotent, linger.ms 5, batch.size 64 KiB, at most 8 batches queued per partition by default)
sends `--records` records of `--record-size` random bytes as fast as it can, for each `--acks`
value, after a warm-up of 10%.
Throughput = records acknowledged / wall time from the first send to the last acknowledgement
(MB = 2^20 bytes of record values, as in Kafka's published figures). Latency = send() to
acknowledgement of every 16th record (p50, p99, max). CPU seconds of every node process and of
this client are reported too: the producer, the brokers and the controller share the same cores
(Kafka's figure used three brokers and a producer on separate machines).

Reference: Kafka's "Benchmarking Apache Kafka: 2 million writes per second (on three cheap
machines)" (Kreps, 2014): one producer thread, 3x replication, 100-byte records, 6 partitions:
786,980 records/s (75.1 MB/s) with async replication (acks=1) and 421,823 records/s (40.2 MB/s)
with synchronous replication (acks=all).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

from harness.bench import kafka_produce, spy
from harness.bench.data_cluster import ACK_NAMES, ACKS, add_common, client_cpu, data_cluster
from harness.bench.quorum import cluster_cpu, percentile
from harness.client import run as client_run
from harness.launcher import cluster as cl

MODES = ("isr", "quorum", "raft")  # topic replication.mode values, measured side by side


async def produce_run(cluster: cl.ClusterFile, topic: str, acks: int, records: int,
                      record_size: int, args: argparse.Namespace,
                      mode: str = "isr") -> dict[str, Any]:  # fmt: skip
    from harness.client import Bootstrap, ClusterClient, Producer, ProducerConfig

    bootstrap = Bootstrap(cluster.cluster_id, tuple((n.id, n.host, n.rpc_port) for n in cluster.brokers))
    client = ClusterClient(bootstrap)
    producer = await Producer.create(client, ProducerConfig(
        acks=acks, linger_ms=args.linger_ms, batch_size=args.batch_size,
        buffer_batches=args.buffer_batches))  # fmt: skip
    value = os.urandom(record_size)
    latencies: list[float] = []

    def sampled(sent: float) -> Any:
        def done(f: Any) -> None:
            if f.exception() is None:
                latencies.append((time.perf_counter() - sent) * 1000)

        return done

    warmup = max(1, records // 10)
    for _ in range(warmup):
        await producer.send(topic, value)
    await producer.flush()
    samplers = spy.start(cluster, args, f"native-acks{ACK_NAMES[acks]}")
    cpu0, ccpu0 = cluster_cpu(cluster), client_cpu()
    started = time.perf_counter()
    futures = []
    for i in range(records):
        future = await producer.send(topic, value)
        if i % 16 == 0:
            future.add_done_callback(sampled(time.perf_counter()))
            futures.append(future)
    await producer.flush()
    elapsed = time.perf_counter() - started
    cpu1, ccpu1 = cluster_cpu(cluster), client_cpu()
    spy.finish(samplers, args, f"native-acks{ACK_NAMES[acks]}")
    failed = sum(1 for f in futures if f.exception() is not None)
    await producer.close()
    client.close()
    node_cpu = {n: round(cpu1[n] - cpu0[n], 2) for n in cpu0}
    broker_cpu_s = sum(cpu1[n.id] - cpu0[n.id] for n in cluster.brokers)
    return {
        "replication_mode": mode,
        "acks": "all" if acks == -1 else str(acks),
        "records": records,
        "record_bytes": record_size,
        "elapsed_s": round(elapsed, 3),
        "records_per_s": round(records / elapsed),
        "mb_per_s": round(records * record_size / elapsed / 2**20, 2),
        "p50_ms": round(percentile(latencies, 0.5), 2) if latencies else None,
        "p99_ms": round(percentile(latencies, 0.99), 2) if latencies else None,
        "max_ms": round(max(latencies), 2) if latencies else None,
        "failed_sampled": failed,
        "node_cpu_s": node_cpu,
        "broker_cpu_us_per_record": round(broker_cpu_s * 1e6 / records, 1),
        "client_cpu_s": round(ccpu1 - ccpu0, 2),
    }


def measure(client: str = "native", records: int = 300_000, acks: str = "all",
            partitions: int = 1, record_size: int = 100) -> dict[str, Any]:  # fmt: skip
    """One row for a table of figures: a fresh cluster (1 controller, 3 brokers, RF 3), one
    producer run of `client` ("native", "confluent-kafka" or "kafka-python") after its warm-up;
    the run's numbers (records_per_s, mb_per_s, node and client CPU seconds, ...)."""
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--records", str(records), "--partitions", str(partitions),
                              "--record-size", str(record_size), "--client", client])  # fmt: skip
    with data_cluster(args, "bench") as cluster:
        if client == "native":
            return client_run(produce_run(cluster, "bench", ACKS[acks], records, record_size, args))
        return kafka_produce.produce_run(cluster, "bench", ACKS[acks], args)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_common(parser)
    parser.add_argument("--acks", default="1,all", help="comma-separated: 0, 1, all")
    parser.add_argument("--replication-mode", default="isr",
                        help="comma-separated topic modes measured side by side in one run: "
                             "isr, quorum, raft (default isr)")
    parser.add_argument("--client", choices=("native", "confluent-kafka", "kafka-python"),
                        default="native",
                        help="the producer: kraftlab's own client (native protocol) or a real "
                             "Kafka client on the brokers' Kafka listener (harness.bench.kafka_produce)")
    spy.add_arguments(parser)


def print_row(r: dict[str, Any], what: str) -> None:
    print(f"{what} {r['replication_mode']} acks={r['acks']}: {r['records']} x {r['record_bytes']} B in {r['elapsed_s']} s "
          f"= {r['records_per_s']} records/s, {r['mb_per_s']} MB/s; latency p50 {r['p50_ms']} ms, "
          f"p99 {r['p99_ms']} ms, max {r['max_ms']} ms; CPU s: nodes {r['node_cpu_s']}, "
          f"client {r['client_cpu_s']}", flush=True)


def run(args: argparse.Namespace) -> int:
    if getattr(args, "client", "native") != "native":
        return kafka_produce.run(args)
    acks_list = [ACKS[a.strip()] for a in args.acks.split(",")]
    modes = [m.strip() for m in args.replication_mode.split(",")]
    if not set(modes) <= set(MODES) or len(set(modes)) != len(modes):
        print(f"error: --replication-mode takes distinct values of {', '.join(MODES)}")
        return 2
    topics = {f"bench-{m}": {"replication.mode": m} for m in modes}
    first, *rest = topics
    results = []
    with data_cluster(args, first, {t: topics[t] for t in rest}, topics[first]) as cluster:
        for mode, topic in zip(modes, topics, strict=True):
            for acks in acks_list:
                result = client_run(produce_run(cluster, topic, acks, args.records,
                                                 args.record_size, args, mode))  # fmt: skip
                results.append(result)
                if not args.json:
                    print_row(result, "produce")
    if args.json:
        print(json.dumps({"bench": "produce", "brokers": args.brokers,
                          "controllers": args.controllers, "partitions": args.partitions,
                          "replication_factor": min(3, args.brokers), "runs": results}))
    elif len(results) > 1:
        print_table(results)
    return 0


def print_table(results: list[dict[str, Any]]) -> None:
    print(f"{'mode':<7} {'acks':<5} {'records/s':>10} {'MB/s':>7} {'p50 ms':>7} {'p99 ms':>7} "
          f"{'broker CPU us/record':>21}")
    for r in results:
        print(f"{r['replication_mode']:<7} {r['acks']:<5} {r['records_per_s']:>10} "
              f"{r['mb_per_s']:>7} {r['p50_ms']!s:>7} {r['p99_ms']!s:>7} "
              f"{r['broker_cpu_us_per_record']:>21}")
