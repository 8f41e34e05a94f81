"""Idle cost of many partitions: CPU % of each broker while nothing is produced.

Method: a fresh cluster (`--controllers`, default 1, and `--brokers`, default 3, on 127.0.0.1,
harness/bench/data_cluster.py) with one topic of `--partitions` (default 1000) partitions, RF 3,
`--replication-mode` (default raft); once every partition has a leader and a full ISR, the bench
waits `--settle-s` (default 10 s: elections, leadership reports and, for raft partitions, the
phase merging of idle long polls, partition/raft/mux.py) and then reads each node's CPU time
(user + system, /proc) over `--seconds` (default 30). CPU % = CPU seconds / wall seconds x 100
(100 = one core busy). For raft partitions it also reports, per broker, what crossed the wire in
that window: RaftEnvelopes sent and the Raft messages they carried (GET /metrics).
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from harness.admin.client import AdminClient
from harness.bench.data_cluster import data_cluster
from harness.bench.quorum import cluster_cpu
from harness.launcher import cluster as cl

COUNTERS = ("kraftlab_raft_partition_envelopes_sent_total",
            "kraftlab_raft_partition_messages_sent_total",
            "kraftlab_raft_partition_core_calls_total")  # fmt: skip


def raft_counters(cluster: cl.ClusterFile) -> dict[int, dict[str, float]]:
    out: dict[int, dict[str, float]] = {}
    for node in cluster.brokers:
        client = AdminClient(node.host, node.admin_port, 5.0)
        try:
            text = client.request("GET", "/metrics")[1]
        finally:
            client.close()
        values = {}
        for line in text.splitlines():
            name, _, value = line.partition(" ")
            if name in COUNTERS:
                values[name] = float(value)
        out[node.id] = values
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--controllers", type=int, default=1)
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--replication-mode", choices=("isr", "quorum", "raft"), default="raft")
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--settle-s", type=float, default=10.0)
    parser.add_argument("--data-dir", help="fresh cluster directory (default: a temp dir)")
    parser.add_argument("--config", action="append", metavar="KEY=VALUE",
                        help="node config override")


def run(args: argparse.Namespace) -> int:
    topic = "idle"
    configs = {"replication.mode": args.replication_mode}
    started = time.monotonic()
    with data_cluster(args, topic, configs=configs) as cluster:
        ready_s = time.monotonic() - started
        time.sleep(args.settle_s)  # not synchronisation: the idle state being measured
        cpu0, wire0 = cluster_cpu(cluster), raft_counters(cluster)
        t0 = time.monotonic()
        time.sleep(args.seconds)
        cpu1, wire1 = cluster_cpu(cluster), raft_counters(cluster)
        wall = time.monotonic() - t0
    per_node = {n: round((cpu1[n] - cpu0[n]) / wall * 100, 2) for n in cpu0}
    wire = {b: {k.removeprefix("kraftlab_raft_partition_").removesuffix("_total"):
                round((wire1[b].get(k, 0) - wire0[b].get(k, 0)) / wall, 1) for k in COUNTERS}
            for b in wire0}  # fmt: skip
    result: dict[str, Any] = {
        "bench": "idle", "replication_mode": args.replication_mode,
        "partitions": args.partitions, "brokers": args.brokers,
        "controllers": args.controllers, "seconds": round(wall, 1),
        "cpu_percent": per_node, "per_second": wire, "ready_s": round(ready_s, 1),
    }
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"{args.partitions} {args.replication_mode} partitions, RF 3, idle for {wall:.0f} s "
          f"(ready after {ready_s:.0f} s):")
    for node in sorted(per_node):
        extra = ""
        if node in wire:
            w = wire[node]
            extra = (f"; per second: {w['envelopes_sent']} envelopes, {w['messages_sent']} Raft "
                     f"messages, {w['core_calls']} core calls")
        print(f"  node {node}: {per_node[node]}% CPU{extra}")
    return 0
