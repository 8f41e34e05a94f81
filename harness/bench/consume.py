"""Consume throughput and latency: 3 brokers, RF 3, one consumer, 100-byte records.

Method: the same fresh cluster as `bench produce` (harness/bench/data_cluster.py). `--records`
records of `--record-size` bytes are produced first (acks=all, so all are below the HW), then:
- catch-up: one harness.client Consumer reads them from offset 0 with `poll_raw` (whole batches
  as bytes, no per-record decoding: what a copy tool or a broker does) and, separately, with
  `poll` (every record decoded into a ConsumerRecord, what an application does); records/s and
  MB/s from the first fetch to the last record;
- end-to-end latency: a producer (acks=all, linger.ms 0) sends `--latency-records` records one at
  a time while the consumer long-polls the tail; latency = consumer receipt - producer send of the
  same record (same host clock), p50/p99/max. This includes the replication to all three
  replicas, since a record is readable only once the HW passes it.

Kafka's published consumer figure for comparison (Kreps, 2014): one consumer thread, 940,521
records/s (89.7 MB/s) on a 6-partition, 3x replicated topic on three machines.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from typing import Any

from harness.bench.data_cluster import add_common, client_cpu, data_cluster
from harness.bench.produce import produce_run
from harness.bench.quorum import cluster_cpu, percentile
from harness.client import run as client_run
from harness.launcher import cluster as cl


async def catch_up(cluster: cl.ClusterFile, topic: str, records: int, record_size: int,
                   raw: bool) -> dict[str, Any]:  # fmt: skip
    from harness.client import Bootstrap, ClusterClient, Consumer, ConsumerConfig

    bootstrap = Bootstrap(cluster.cluster_id, tuple((n.id, n.host, n.rpc_port) for n in cluster.brokers))
    client = ClusterClient(bootstrap)
    consumer = Consumer(client, ConsumerConfig(max_wait_ms=500, max_bytes=1 << 20))
    await consumer.assign(topic, None, offset=0)
    loop = asyncio.get_running_loop()
    cpu0, ccpu0 = cluster_cpu(cluster), client_cpu()
    started = time.perf_counter()
    seen = 0
    fetches = 0
    deadline = started + 120
    while seen < records and loop.time() < deadline:
        fetches += 1
        if raw:
            seen += sum(b.record_count for b in await consumer.poll_raw())
        else:
            seen += len(await consumer.poll())
    elapsed = time.perf_counter() - started
    cpu1, ccpu1 = cluster_cpu(cluster), client_cpu()
    client.close()
    return {
        "mode": "poll_raw (batches as bytes)" if raw else "poll (records decoded)",
        "records": seen,
        "elapsed_s": round(elapsed, 3),
        "records_per_s": round(seen / elapsed),
        "mb_per_s": round(seen * record_size / elapsed / 2**20, 2),
        "fetches": fetches,
        "node_cpu_s": {n: round(cpu1[n] - cpu0[n], 2) for n in cpu0},
        "client_cpu_s": round(ccpu1 - ccpu0, 2),
    }


async def end_to_end(cluster: cl.ClusterFile, topic: str, count: int,
                     record_size: int) -> dict[str, Any]:  # fmt: skip
    from harness.client import (
        Bootstrap,
        ClusterClient,
        Consumer,
        ConsumerConfig,
        Producer,
        ProducerConfig,
    )

    bootstrap = Bootstrap(cluster.cluster_id, tuple((n.id, n.host, n.rpc_port) for n in cluster.brokers))
    client = ClusterClient(bootstrap)
    producer = await Producer.create(client, ProducerConfig(acks=-1, linger_ms=0))
    consumer = Consumer(client, ConsumerConfig(max_wait_ms=500, auto_offset_reset="latest"))
    await consumer.assign(topic, 0)
    await consumer.poll()  # position at the current end
    sent_at: dict[bytes, float] = {}
    latencies: list[float] = []
    loop = asyncio.get_running_loop()
    padding = os.urandom(max(0, record_size - 8))

    async def consume() -> None:
        deadline = loop.time() + 60
        while len(latencies) < count and loop.time() < deadline:
            for r in await consumer.poll():
                t0 = sent_at.pop((r.value or b"")[:8], None)
                if t0 is not None:
                    latencies.append((time.perf_counter() - t0) * 1000)

    reader = asyncio.ensure_future(consume())
    for i in range(count):
        tag = i.to_bytes(8, "big")
        sent_at[tag] = time.perf_counter()
        future = await producer.send(topic, tag + padding, partition=0)
        await future
    await asyncio.wait_for(reader, 60)
    await producer.close()
    client.close()
    return {
        "records": len(latencies),
        "p50_ms": round(percentile(latencies, 0.5), 2),
        "p99_ms": round(percentile(latencies, 0.99), 2),
        "max_ms": round(max(latencies), 2),
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_common(parser)
    parser.add_argument("--latency-records", type=int, default=2000)


def run(args: argparse.Namespace) -> int:
    topic = "bench"
    with data_cluster(args, topic) as cluster:
        loaded = client_run(produce_run(cluster, topic, -1, args.records, args.record_size, args))
        total = args.records + max(1, args.records // 10)  # the produce run's warm-up too
        raw = client_run(catch_up(cluster, topic, total, args.record_size, raw=True))
        decoded = client_run(catch_up(cluster, topic, total, args.record_size, raw=False))
        latency = client_run(end_to_end(cluster, topic, args.latency_records, args.record_size))
    result = {"bench": "consume", "brokers": args.brokers, "partitions": args.partitions,
              "loaded_with": {k: loaded[k] for k in ("records", "records_per_s")},
              "catch_up": [raw, decoded], "end_to_end_latency": latency}
    if args.json:
        print(json.dumps(result))
        return 0
    for r in (raw, decoded):
        print(f"consume {r['mode']}: {r['records']} x {args.record_size} B in {r['elapsed_s']} s = "
              f"{r['records_per_s']} records/s, {r['mb_per_s']} MB/s ({r['fetches']} polls); "
              f"CPU s: nodes {r['node_cpu_s']}, client {r['client_cpu_s']}", flush=True)
    print(f"end-to-end (produce acks=all -> consume, one record at a time): "
          f"{latency['records']} records, p50 {latency['p50_ms']} ms, p99 {latency['p99_ms']} ms, "
          f"max {latency['max_ms']} ms", flush=True)
    return 0
