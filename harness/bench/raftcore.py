"""CPU cost of the Raft core: 3 voters in one process, no network, no fsync.

Three RaftCores on RaftLogStore over in-memory SimStorage, every message round-tripped through
quorum.codec, effects run by harness.drive.effects.execute_effects: what one commit costs in Python
before any I/O. This is the ceiling under `kraftlab bench quorum`, which adds real
sockets and fsync. Sequential: one proposal at a time, each committed before the next. Batched:
`--batch` records per proposal (what a driver's group commit produces under concurrency).
"""

from __future__ import annotations

import argparse
import json
import time
from collections import deque
from typing import Any

import structlog

from harness.drive.effects import execute_effects
from partition.log.storage import SimStorage
from partition.raft.log import RaftLogStore
from quorum import codec
from quorum.raft.config import RaftConfig
from quorum.raft.core import Accepted, RaftCore
from quorum.raft.effects import (
    ElectionState,
    LeaderChanged,
    ReadBarrierCompleted,
    ReadBarrierFailed,
)
from quorum.raft.log import OffsetAndEpoch


class _Node:
    """The execute_effects env of one in-process voter."""

    def __init__(self, node_id: int, voters: tuple[int, ...], outbox: deque[Any]) -> None:
        self.node_id = node_id
        self.log = RaftLogStore.open(SimStorage(), f"/bench/{node_id}")
        self.outbox = outbox
        self.core = RaftCore(
            RaftConfig(max_idle_interval_ms=0), node_id, voters, self.log, None, node_id, 0
        )

    def send(self, to: int, message: Any) -> None:
        self.outbox.append((self.node_id, to, codec.encode(message)))

    def persist_election_state(self, state: ElectionState) -> None:
        pass

    def on_commit_advanced(self, high_watermark: int) -> None:
        pass

    def on_leader_changed(self, effect: LeaderChanged) -> None:
        pass

    def on_read_barrier(self, effect: ReadBarrierCompleted | ReadBarrierFailed) -> None:
        pass

    def on_snapshot_installed(self, snapshot: OffsetAndEpoch) -> None:
        pass


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--proposals", type=int, default=3000, help="proposals to commit")
    parser.add_argument("--batch", type=int, default=1, help="records per proposal")
    parser.add_argument("--value-bytes", type=int, default=100)


def _measure(proposals: int, batch: int, value_bytes: int) -> dict[str, Any]:
    voters = (1, 2, 3)
    outbox: deque[Any] = deque()
    nodes = {v: _Node(v, voters, outbox) for v in voters}
    now = 0

    def drain() -> None:
        while outbox:
            src, dst, frame = outbox.popleft()
            node = nodes[dst]
            execute_effects(node.core.handle(src, codec.decode(frame), now), node)

    while not any(n.core.is_leader for n in nodes.values()):
        now = min(n.core.next_deadline_ms() for n in nodes.values())
        for n in nodes.values():
            if n.core.next_deadline_ms() <= now:
                execute_effects(n.core.tick(now), n)
        drain()
    leader = next(n for n in nodes.values() if n.core.is_leader)
    records = [b"v" * value_bytes] * batch
    latencies: list[float] = []
    start = time.perf_counter()
    for _ in range(proposals):
        t0 = time.perf_counter()
        result, effects = leader.core.propose(records, now)
        assert isinstance(result, Accepted)
        execute_effects(effects, leader)
        drain()
        assert leader.core.high_watermark > result.last_offset
        latencies.append((time.perf_counter() - t0) * 1e6)
    elapsed = time.perf_counter() - start
    latencies.sort()
    return {
        "proposals": proposals,
        "batch": batch,
        "commits_per_s": round(proposals * batch / elapsed),
        "p50_us": round(latencies[len(latencies) // 2]),
        "p99_us": round(latencies[int(len(latencies) * 0.99)]),
    }


def run(args: argparse.Namespace) -> int:
    structlog.configure(logger_factory=structlog.ReturnLoggerFactory())
    result = _measure(args.proposals, args.batch, args.value_bytes)
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:>14}  {value}")
    return 0
