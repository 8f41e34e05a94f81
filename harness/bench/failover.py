"""Controller failover: SIGKILL the leader, time until a write issued after the kill succeeds.
(`--fault pause`: SIGSTOP instead, a hung leader, resumed after each trial.) With `--partition`:
partition-leader failover per replication mode instead (harness/bench/partition_failover.py).

Method (as for the peer figures in docs/benchmarks.md): a sequential writer PUTs 100-byte
values over the admin API; the leader is killed with SIGKILL; the clock starts at the kill and
stops at the completion of the first successful write issued after it. The writer rotates over all
controllers on any error (refused connection, 503 LEADER_NOT_AVAILABLE, 421, 504) with a 300 ms
per-request timeout, like the etcd client used for the peers; it follows a 421's leader hint,
except to the node whose request last timed out (a follower names the hung leader until it has
noticed the fault itself), and passes that node over for a second while others answer
(`retry_put`). Median of `--trials` (default 5);
between trials the killed node is restarted and the bench waits until all nodes agree on a leader.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.admin.client import AdminClient, AdminError, OutcomeUnknown
from harness.bench import partition_failover
from harness.launcher import cluster as cl

VALUE = "v" * 100
REQUEST_TIMEOUT_S = 0.3
AVOID_TIMED_OUT_S = 1.0  # a node that timed out is asked again after this, if nobody else leads


@dataclass(frozen=True, slots=True)
class FailoverSample:
    killed: int
    new_leader: int | None
    elapsed_ms: float
    attempts: int


def write_until_success(
    cluster: cl.ClusterFile, key: str, deadline_s: float, first: int | None = None
) -> tuple[float, int, dict[str, Any]]:
    """Rotate over all controllers, from node `first` (the leader the writer was writing to),
    until one PUT succeeds; returns (completion time, attempts, answer). Raises ClusterError at
    the deadline."""
    clients = [AdminClient(n.host, n.admin_port, REQUEST_TIMEOUT_S) for n in cluster.nodes]
    return retry_put(clients, [n.id for n in cluster.nodes], key, deadline_s, first)


def _timed_out(exc: OSError) -> bool:
    """A request that waited out its timeout: a plain timeout, or a write's (OutcomeUnknown: the
    PUT was sent, no answer came back within the timeout)."""
    return isinstance(exc, TimeoutError) or (
        isinstance(exc, OutcomeUnknown) and isinstance(exc.cause, TimeoutError)
    )


def retry_put(clients: Sequence[Any], ids: Sequence[int], key: str, deadline_s: float,
              first: int | None = None, clock: Callable[[], float] = time.monotonic,
              pause: Callable[[float], None] = time.sleep) -> tuple[float, int, dict[str, Any]]:
    """`write_until_success` over given clients (`kv_put` each). It starts at the leader it
    knew (`first`), as a client that was writing to it does: a follower asked first forwards to
    that leader, and a hung leader holds the forwarded write as long as a direct one, but the
    timeout would then be blamed on the follower. A node whose request timed out is passed over
    for AVOID_TIMED_OUT_S while the others answer: a hung leader keeps its sockets open and
    would hold every request for the whole timeout again, and the others answer
    LEADER_NOT_AVAILABLE (or name it) until they have noticed the fault themselves."""
    attempts = 0
    i = ids.index(first) if first in ids else 0
    timed_out: int | None = None  # the node whose request last timed out
    timed_out_at = 0.0
    while clock() < deadline_s:
        node = ids[i % len(ids)]
        if node == timed_out and clock() - timed_out_at < AVOID_TIMED_OUT_S:
            i += 1
            if i % len(ids) == 0:
                pause(0.002)
            continue
        attempts += 1
        try:
            answer = clients[i % len(clients)].kv_put(key, VALUE)
            return clock(), attempts, answer
        except AdminError as exc:
            hint = exc.body.get("leader")
            # Follow a leader hint, except back to the node that just timed out: a follower
            # names the old leader until it has noticed the fault itself.
            if exc.status == 421 and hint in ids and hint != timed_out:
                i = ids.index(hint)
                continue
        except OSError as exc:
            if _timed_out(exc):
                timed_out, timed_out_at = node, clock()
        i += 1
        if i % len(clients) == 0:
            pause(0.002)  # poll interval of a retrying client, not synchronisation
    raise cl.ClusterError("no write succeeded before the deadline")


def measure_one_failover(
    cluster: cl.ClusterFile, data_dir: Path, key: str, fault: str = "kill"
) -> FailoverSample:
    """Kill (SIGKILL) or pause (SIGSTOP) the current leader while writing sequentially; time to
    the next successful write. A paused leader is left paused: the caller resumes it."""
    views = cl.quorum_view(cluster)
    leader = cl.agreed_leader(views, [n.id for n in cl.running_nodes(cluster)])
    if leader is None:
        raise cl.ClusterError("no agreed leader before the kill")
    node = cluster.node(leader)
    writer = AdminClient(node.host, node.admin_port, REQUEST_TIMEOUT_S * 5)
    for i in range(20):  # steady state: sequential writes to the leader
        writer.kv_put(f"{key}-warm-{i}", VALUE)
    assert node.pid is not None
    os.kill(node.pid, signal.SIGKILL if fault == "kill" else signal.SIGSTOP)
    killed_at = time.monotonic()
    done_at, attempts, _ = write_until_success(cluster, key, killed_at + 30, first=leader)
    if fault == "kill":
        cl.wait_dead(node, 5.0)
        node.pid = None
        cluster.save(data_dir)
    survivors = [n.id for n in cluster.nodes if n.id != leader]
    views = cl.quorum_view(cluster)
    return FailoverSample(
        killed=leader,
        new_leader=cl.agreed_leader(views, survivors),
        elapsed_ms=(done_at - killed_at) * 1000,
        attempts=attempts,
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--trials", type=int, default=5, help="failovers to measure (default 5)")
    parser.add_argument("--fault", choices=["kill", "pause"], default="kill",
                        help="SIGKILL the leader (default), or SIGSTOP it: a hung leader whose "
                             "sockets stay open, found only by the fetch timeout")
    parser.add_argument("--controllers", type=int, default=3)
    parser.add_argument("--partition", action="store_true",
                        help="partition-leader failover (kill -9 of the leader's broker, 3 "
                             "brokers) per --replication-mode instead of the controller's")
    parser.add_argument("--replication-mode", default="isr,quorum,raft",
                        help="with --partition: comma-separated topic modes (default all three)")
    parser.add_argument("--data-dir", help="fresh cluster directory (default: a temp dir)")
    parser.add_argument("--config", action="append", metavar="KEY=VALUE",
                        help="node config override")


def run(args: argparse.Namespace) -> int:
    if args.partition:
        if args.fault != "kill":
            print("error: --partition measures --fault kill only")
            return 2
        return partition_failover.run(args)
    base = Path(args.data_dir) if args.data_dir else Path(tempfile.mkdtemp(prefix="kraftlab-failover-"))
    cluster = cl.create_cluster(base, args.controllers, cl.parse_overrides(args.config))
    base = base.resolve()
    samples: list[FailoverSample] = []
    try:
        for node in cluster.nodes:
            cl.start_node(cluster, base, node)
        cl.wait_for_leader(cluster, [n.id for n in cluster.nodes], 30)
        for trial in range(args.trials):
            sample = measure_one_failover(cluster, base, f"failover-{trial}", args.fault)
            samples.append(sample)
            if not args.json:
                print(f"trial {trial + 1}: {args.fault} {sample.killed}, new leader {sample.new_leader}, "
                      f"first write after the fault completed in {sample.elapsed_ms:.0f} ms "
                      f"({sample.attempts} attempts)", flush=True)
            killed = cluster.node(sample.killed)
            if args.fault == "kill":
                cl.start_node(cluster, base, killed)
            else:
                cl.signal_node(killed, signal.SIGCONT)
            cl.wait_for_leader(cluster, [n.id for n in cluster.nodes], 30)
    finally:
        for node in cluster.nodes:
            cl.stop_node(node, force=True, timeout_s=5)
            node.pid = None
        cluster.save(base)
    elapsed = [s.elapsed_ms for s in samples]
    result = {
        "bench": "failover",
        "controllers": args.controllers,
        "fault": args.fault,
        "trials": len(samples),
        "median_ms": round(statistics.median(elapsed), 1),
        "min_ms": round(min(elapsed), 1),
        "max_ms": round(max(elapsed), 1),
        "samples_ms": [round(x, 1) for x in elapsed],
        "method": f"{'SIGKILL' if args.fault == 'kill' else 'SIGSTOP'} leader; sequential PUT /kv over the admin API rotating over all "
                  "controllers (300 ms timeout); kill -> completion of first successful write",
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(f"failover median {result['median_ms']} ms over {len(samples)} trials "
              f"(min {result['min_ms']}, max {result['max_ms']})")
    return 0
