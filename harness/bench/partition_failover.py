"""Partition-leader failover per replication mode (`kraftlab bench failover --partition`): SIGKILL
the broker leading a partition, time until an acks=all write issued after the kill succeeds.

Method: a fresh cluster (`--controllers`, default 3, and 3 brokers on 127.0.0.1, the launcher of
`kraftlab cluster up`, node settings from `--config`) with one single-partition RF-3 topic per
`--replication-mode` value (default isr,quorum,raft; `failover-<mode>`). Per trial and mode: 20
sequential acks=all writes to the partition leader through the admin API (POST
/topics/T/partitions/0/records), then SIGKILL of the leader's broker; the clock starts at the
kill and stops at the completion of the first acks=all write (issued after it) that succeeds.
The writer rotates over the surviving brokers with a 1 s produce timeout, and goes straight to
the leader a NOT_LEADER_OR_FOLLOWER answer names (KIP-951-style hint). The killed broker is then
restarted, and the next measurement waits until every topic's partition has a leader and a full
ISR again. Reported: every sample, and the median per mode.

What each mode waits for (docs/replication.md): isr, the controller's broker session timeout
(broker.session.timeout.ms) then an ISR election; quorum, the same session timeout, a fence
commit and the surviving replicas' position reports; raft, the surviving voters' own election
(a refused connection starts it at once), with no controller on the path.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from harness.admin.client import AdminClient, AdminError
from harness.launcher import cluster as cl

MODES = ("isr", "quorum", "raft")
PRODUCE_TIMEOUT_MS = 1000


def _topic(mode: str) -> str:
    return f"failover-{mode}"


def partition_view(cluster: cl.ClusterFile, topic: str) -> dict[str, Any] | None:
    """Partition 0 as the metadata image has it (linearizable, any live node)."""
    for node in cl.running_nodes(cluster):
        client = AdminClient(node.host, node.admin_port, 2.0)
        try:
            part: dict[str, Any] = client.get_json(f"/topics/{topic}")["partitions"][0]
            return part
        except (AdminError, OSError):
            continue
        finally:
            client.close()
    return None


def produce(cluster: cl.ClusterFile, broker: int, topic: str, timeout_s: float) -> tuple[int, Any]:
    node = cluster.node(broker)
    client = AdminClient(node.host, node.admin_port, timeout_s)
    try:
        return client.request("POST", f"/topics/{topic}/partitions/0/records?acks=all&timeout_ms="
                              f"{PRODUCE_TIMEOUT_MS}", {"records": [{"value": "v" * 100}]})  # fmt: skip
    finally:
        client.close()


def write_until_success(cluster: cl.ClusterFile, topic: str, survivors: list[int],
                        deadline: float) -> tuple[float, int, int]:  # fmt: skip
    """(completion time, broker that took it, attempts)."""
    attempts = 0
    i = 0
    target = survivors[0]
    while time.monotonic() < deadline:
        attempts += 1
        try:
            status, body = produce(cluster, target, topic, PRODUCE_TIMEOUT_MS / 1000 + 1)
        except OSError:
            status, body = 0, None
        if status == 200:
            return time.monotonic(), target, attempts
        hint = body.get("leader") if isinstance(body, dict) else None
        if hint in survivors and hint != target:
            target = hint
            continue
        i += 1
        target = survivors[i % len(survivors)]
        if i % len(survivors) == 0:
            time.sleep(0.002)  # poll interval of a retrying client, not synchronisation
    raise cl.ClusterError(f"{topic}: no acks=all write succeeded before the deadline")


def wait_healthy(cluster: cl.ClusterFile, modes: list[str], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        views = [partition_view(cluster, _topic(m)) for m in modes]
        if all(v is not None and v["leader"] is not None and len(v["isr"]) == len(v["replicas"])
               for v in views):  # fmt: skip
            return
        time.sleep(0.1)
    raise cl.ClusterError("partitions not led with full ISRs in time")


def measure(cluster: cl.ClusterFile, base: Path, mode: str) -> dict[str, Any]:
    topic = _topic(mode)
    view = partition_view(cluster, topic)
    if view is None or view["leader"] is None:
        raise cl.ClusterError(f"{topic} has no leader")
    leader = int(view["leader"])
    for _ in range(20):  # steady state
        status, body = produce(cluster, leader, topic, 5.0)
        if status != 200:
            raise cl.ClusterError(f"{topic}: warm-up write refused: {body}")
    node = cluster.node(leader)
    assert node.pid is not None
    os.kill(node.pid, signal.SIGKILL)
    killed_at = time.monotonic()
    survivors = [b.id for b in cluster.brokers if b.id != leader]
    done_at, new_leader, attempts = write_until_success(cluster, topic, survivors, killed_at + 60)
    cl.wait_dead(node, 5.0)
    node.pid = None
    cluster.save(base)
    return {"mode": mode, "killed": leader, "new_leader": new_leader,
            "elapsed_ms": round((done_at - killed_at) * 1000, 1), "attempts": attempts}


def run(args: argparse.Namespace) -> int:
    modes = [m.strip() for m in args.replication_mode.split(",")]
    if not set(modes) <= set(MODES) or len(set(modes)) != len(modes):
        print(f"error: --replication-mode takes distinct values of {', '.join(MODES)}")
        return 2
    base = Path(args.data_dir) if args.data_dir else Path(tempfile.mkdtemp(prefix="kraftlab-pfail-"))
    overrides = cl.parse_overrides(args.config)
    cluster = cl.create_cluster(base, args.controllers, overrides, brokers=3)
    base = base.resolve()
    samples: list[dict[str, Any]] = []
    try:
        for node in cluster.nodes:
            cl.start_node(cluster, base, node)
        cl.wait_for_leader(cluster, [n.id for n in cluster.nodes], 30)
        cl.wait_for_brokers(cluster, [n.id for n in cluster.brokers], 30)
        admin = AdminClient(cluster.controllers[0].host, cluster.controllers[0].admin_port, 10)
        for mode in modes:
            admin.request("POST", "/topics", {"name": _topic(mode), "partitions": 1,
                                              "replication_factor": 3,
                                              "configs": {"replication.mode": mode}})  # fmt: skip
        admin.close()
        wait_healthy(cluster, modes, 60)
        for trial in range(args.trials):
            for mode in modes:
                sample = measure(cluster, base, mode)
                samples.append(sample)
                if not args.json:
                    print(f"trial {trial + 1} {mode}: kill -9 broker {sample['killed']}, acks=all "
                          f"ok on broker {sample['new_leader']} after {sample['elapsed_ms']:.0f} ms"
                          f" ({sample['attempts']} attempts)", flush=True)
                killed = sample["killed"]
                old_epoch = {killed: cl.broker_epochs(cluster, 60).get(killed, -1)}
                cl.start_node(cluster, base, cluster.node(killed))
                cl.wait_for_brokers(cluster, [n.id for n in cluster.brokers], 60,
                                    newer_than=old_epoch)
                wait_healthy(cluster, modes, 60)
    finally:
        for node in cluster.nodes:
            cl.stop_node(node, force=True, timeout_s=5)
            node.pid = None
        cluster.save(base)
    per_mode = {m: [s["elapsed_ms"] for s in samples if s["mode"] == m] for m in modes}
    result = {"bench": "failover", "partition": True, "controllers": args.controllers,
              "config": overrides, "trials": args.trials, "samples": samples,
              "median_ms": {m: round(statistics.median(v), 1) for m, v in per_mode.items() if v}}  # fmt: skip
    if args.json:
        print(json.dumps(result))
    else:
        for m, v in per_mode.items():
            print(f"{m:<7} median {statistics.median(v):.0f} ms over {len(v)} trials "
                  f"(min {min(v):.0f}, max {max(v):.0f})")
    return 0
