"""What the data-plane benchmarks share (`bench produce`, `bench consume`, `bench kafka-produce`):
a fresh cluster with one replicated topic whose leaders are elected and ISRs full, the options
that shape it and the producer, and the CPU time of this client process.

The cluster: `--controllers` (default 1) and `--brokers` (default 3) on 127.0.0.1, laid out by
the same launcher as `kraftlab cluster up`, one topic of `--partitions` (default 1) partitions,
replication factor min(3, brokers); stopped (SIGKILL) when the benchmark is done.
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from harness.admin.client import AdminClient
from harness.launcher import cluster as cl

ACKS = {"1": 1, "all": -1, "0": 0}
ACK_NAMES = {v: k for k, v in ACKS.items()}


@contextmanager
def data_cluster(args: argparse.Namespace, topic: str,
                 more: Mapping[str, Mapping[str, str]] | None = None,
                 configs: Mapping[str, str] | None = None) -> Iterator[cl.ClusterFile]:  # fmt: skip
    """A fresh cluster with `topic` (topic `configs`) and the topics of `more` (name: configs),
    all of RF = min(3, brokers), created and their leaders elected and ISRs full."""
    base = Path(args.data_dir) if args.data_dir else Path(tempfile.mkdtemp(prefix="kraftlab-bench-"))
    cluster = cl.create_cluster(base, args.controllers, cl.parse_overrides(args.config),
                                brokers=args.brokers)  # fmt: skip
    base = base.resolve()
    try:
        for node in cluster.nodes:
            cl.start_node(cluster, base, node)
        cl.wait_for_leader(cluster, [n.id for n in cluster.nodes], 30)
        cl.wait_for_brokers(cluster, [n.id for n in cluster.brokers], 30)
        admin = AdminClient(cluster.controllers[0].host, cluster.controllers[0].admin_port, 10)
        topics = {topic: dict(configs or {}), **{t: dict(c) for t, c in (more or {}).items()}}
        for name, topic_configs in topics.items():
            admin.request("POST", "/topics", {"name": name, "partitions": args.partitions,
                                              "replication_factor": min(3, args.brokers),
                                              "configs": topic_configs})  # fmt: skip
        deadline = time.monotonic() + 20 + args.partitions / 50
        while time.monotonic() < deadline:  # every partition led and its ISR full
            parts = [p for name in topics for p in admin.get_json(f"/topics/{name}")["partitions"]]
            if all(p["leader"] is not None and len(p["isr"]) == len(p["replicas"]) for p in parts):
                break
            time.sleep(0.05)
        admin.close()
        yield cluster
    finally:
        for node in cluster.nodes:
            cl.stop_node(node, force=True, timeout_s=5)
            node.pid = None
        cluster.save(base)


def client_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--controllers", type=int, default=1)
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--record-size", type=int, default=100)
    parser.add_argument("--linger-ms", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=65_536)
    parser.add_argument("--buffer-batches", type=int, default=8,
                        help="batches queued per partition before send() waits (latency vs depth)")
    parser.add_argument("--data-dir", help="fresh cluster directory (default: a temp dir)")
    parser.add_argument("--config", action="append", metavar="KEY=VALUE",
                        help="node config override (e.g. replica.fetch.wait.max.ms=100)")
