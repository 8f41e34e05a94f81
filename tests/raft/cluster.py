"""A tiny deterministic message router for Raft core tests (not the simulator, which is
harness/sim): explicit virtual time, per-message latency, cut links, stopped nodes, and every
effect executed through harness.drive.effects.execute_effects, the same executor the drivers use."""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from harness.drive.effects import execute_effects
from quorum import codec
from quorum.raft.config import RaftConfig
from quorum.raft.core import Accepted, RaftCore
from quorum.raft.effects import (
    CommitAdvanced,
    Effect,
    ElectionState,
    LeaderChanged,
    ReadBarrierCompleted,
    ReadBarrierFailed,
    VoterChangeCompleted,
)
from quorum.raft.log import OffsetAndEpoch
from tests.raft.memlog import MemLog


@dataclass
class Node:
    cluster: Cluster
    node_id: int
    log: Any  # MemLog, or any RaftLogWriter (tests/raft/test_real_log.py)
    core: RaftCore
    persisted: ElectionState | None = None
    applied: int = 0
    committed: dict[int, tuple[int, bytes, bool]] = field(default_factory=dict)
    barriers: list[ReadBarrierCompleted | ReadBarrierFailed] = field(default_factory=list)
    leader_changes: list[LeaderChanged] = field(default_factory=list)
    installed: list[OffsetAndEpoch] = field(default_factory=list)
    voter_changes: list[VoterChangeCompleted] = field(default_factory=list)
    up: bool = True

    # EffectEnv
    def send(self, to: int, message: Any) -> None:
        self.cluster.enqueue(self.node_id, to, message)

    def persist_election_state(self, state: ElectionState) -> None:
        self.persisted = state

    def on_commit_advanced(self, high_watermark: int) -> None:
        assert high_watermark <= self.log.end_offset, "commit beyond the local log"
        start = max(self.applied, self.log.start_offset)
        if isinstance(self.log, MemLog):
            base = self.log.start_offset
            entries = self.log.entries[start - base : high_watermark - base]
        else:
            entries = self.log.read(start, 1 << 30) if start < high_watermark else []
        for e in entries:
            if e.offset >= high_watermark:
                break
            self.committed[e.offset] = (e.epoch, e.data, e.control)
            self.applied = e.offset + 1

    def on_leader_changed(self, effect: LeaderChanged) -> None:
        self.leader_changes.append(effect)

    def on_read_barrier(self, effect: ReadBarrierCompleted | ReadBarrierFailed) -> None:
        self.barriers.append(effect)

    def on_snapshot_installed(self, snapshot: OffsetAndEpoch) -> None:
        self.installed.append(snapshot)
        self.applied = snapshot.offset

    def on_voter_change_completed(self, effect: VoterChangeCompleted) -> None:
        self.voter_changes.append(effect)


class Cluster:
    def __init__(
        self,
        voters: int = 3,
        observers: tuple[int, ...] = (),
        config: RaftConfig | None = None,
        seed: int = 0,
        latency_ms: int = 1,
        wire: bool = True,
        log_factory: Callable[[int], Any] | None = None,
    ) -> None:
        self.config = config or RaftConfig()
        self.voters = tuple(range(1, voters + 1))
        self.now = 0
        self.seed = seed
        self.latency_ms = latency_ms
        self.wire = wire  # round-trip every message through the codec
        self.queue: list[tuple[int, int, int, int, Any]] = []
        self._seq = 0
        self.cut: set[tuple[int, int]] = set()
        self.refuse_down = False  # sending to a stopped node reports peer_unreachable
        self.dropped = 0
        self.fault_rng: random.Random | None = None
        self.drop_rate = self.dup_rate = 0.0
        self.jitter_ms = 0
        self.effect_log: list[tuple[int, Effect]] = []
        self.leader_commits: list[tuple[int, int]] = []
        self.nodes: dict[int, Node] = {}
        factory = log_factory or (lambda nid: MemLog())
        for nid in (*self.voters, *observers):
            self.nodes[nid] = self._make_node(nid, factory(nid), None)

    def _make_node(self, nid: int, log: Any, state: ElectionState | None) -> Node:
        core = RaftCore(self.config, nid, self.voters, log, state, self.seed * 1000 + nid, self.now)
        node = Node(self, nid, log, core, persisted=state)
        node.applied = log.start_offset
        return node

    # ------------------------------------------------------------------------- network

    def set_faults(self, rng: random.Random, drop: float, duplicate: float, jitter_ms: int) -> None:
        """Seeded lossy network: drop, duplicate, and reorder (by jitter) messages."""
        self.fault_rng, self.drop_rate, self.dup_rate, self.jitter_ms = (
            rng,
            drop,
            duplicate,
            jitter_ms,
        )

    def enqueue(self, src: int, dst: int, message: Any) -> None:
        if self.wire:
            message = codec.decode(codec.encode(message))
        copies = 1
        rng = self.fault_rng
        if rng is not None:
            if rng.random() < self.drop_rate:
                self.dropped += 1
                return
            if rng.random() < self.dup_rate:
                copies = 2
        for _ in range(copies):
            delay = self.latency_ms + (rng.randint(0, self.jitter_ms) if rng else 0)
            self._seq += 1
            heapq.heappush(self.queue, (self.now + delay, self._seq, src, dst, message))

    def isolate(self, nid: int) -> None:
        for other in self.nodes:
            if other != nid:
                self.cut |= {(nid, other), (other, nid)}

    def heal(self) -> None:
        self.cut.clear()

    # --------------------------------------------------------------------------- nodes

    def run(self, node: Node, effects: list[Effect]) -> None:
        for e in effects:
            self.effect_log.append((node.node_id, e))
            if isinstance(e, CommitAdvanced) and node.core.is_leader:
                # (epoch, hw) of a leader's own commit: what leader completeness is about.
                self.leader_commits.append((node.core.epoch, e.high_watermark))
        execute_effects(effects, node)

    def stop(self, nid: int) -> None:
        node = self.nodes[nid]
        node.up = False
        node.log.crash()

    def restart(self, nid: int) -> Node:
        old = self.nodes[nid]
        node = self._make_node(nid, old.log, old.persisted)
        node.committed = dict(old.committed)  # what it applied before stays applied
        self.nodes[nid] = node
        return node

    def propose(self, nid: int, *records: bytes) -> Any:
        node = self.nodes[nid]
        result, effects = node.core.propose(list(records), self.now)
        self.run(node, effects)
        return result

    # ---------------------------------------------------------------------------- time

    def step(self) -> bool:
        """Run the next event; False when nothing is due before the end of time."""
        up = [n for n in self.nodes.values() if n.up]
        t_tick = min((n.core.next_deadline_ms() for n in up), default=1 << 62)
        t_msg = self.queue[0][0] if self.queue else 1 << 62
        if min(t_tick, t_msg) >= 1 << 62:
            return False
        if t_msg <= t_tick:
            self.deliver(heapq.heappop(self.queue))
        else:
            self.now = max(self.now, t_tick)
            for n in up:
                if n.core.next_deadline_ms() <= self.now:
                    self.run(n, n.core.tick(self.now))
        return True

    def deliver(self, item: tuple[int, int, int, int, Any]) -> None:
        """Deliver one message taken off the queue, or drop it (stopped target, cut link). Time
        moves to its arrival. Also called by drivers that pick messages by hand (tests/transcripts)."""
        at, _, src, dst, message = item
        self.now = max(self.now, at)
        target = self.nodes.get(dst)
        sender = self.nodes.get(src)
        if target is None or not target.up:
            self.dropped += 1
            if self.refuse_down and sender is not None and sender.up and (src, dst) not in self.cut:
                self.run(sender, sender.core.peer_unreachable(dst, self.now))
        elif (src, dst) in self.cut:
            self.dropped += 1
        else:
            self.run(target, target.core.handle(src, message, self.now))

    def advance(self, ms: int, max_events: int = 200_000) -> None:
        end = self.now + ms
        for _ in range(max_events):
            up = [n for n in self.nodes.values() if n.up]
            t_next = min(
                min((n.core.next_deadline_ms() for n in up), default=1 << 62),
                self.queue[0][0] if self.queue else 1 << 62,
            )
            if t_next > end:
                self.now = end
                return
            self.step()
        raise AssertionError(f"no quiescence after {max_events} events at {self.now} ms")

    def leaders(self) -> list[Node]:
        return [n for n in self.nodes.values() if n.up and n.core.is_leader]

    def leader(self) -> Node:
        leaders = self.leaders()
        assert len(leaders) == 1, [(n.node_id, n.core.epoch) for n in leaders]
        return leaders[0]

    def wait_for_leader(self, within_ms: int = 10_000) -> Node:
        deadline = self.now + within_ms
        while self.now < deadline:
            self.advance(50)
            leaders = self.leaders()
            if len(leaders) == 1:
                return leaders[0]
        raise AssertionError(f"no single leader within {within_ms} ms")

    def commit(self, nid: int, *records: bytes, within_ms: int = 5_000) -> Accepted:
        result = self.propose(nid, *records)
        assert isinstance(result, Accepted), result
        deadline = self.now + within_ms
        while self.nodes[nid].core.high_watermark <= result.last_offset:
            assert self.now < deadline, f"not committed within {within_ms} ms"
            self.advance(5)
        return result
