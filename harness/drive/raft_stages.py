"""The I/O-free part of the raft-partition round discipline both drivers run (partition/raft/
effects.py "Rules for such a driver"): one input into a replica's core, its effects cut into
stages, and the stages run up to the next fsync or election-state write (`call_core`,
`run_stages`); the passes of a round's end until nothing is left to run (`run_round`); the
effect environment every hosted replica shares (`HostedReplica`); the recovery flush of a log a
replica is (re)built on (`recovery_flush`). The asyncio runtime (harness/runtime/
raft_partitions.py) and the simulator (harness/sim/actors/raft_host.py) keep what differs in
their rounds (when a round ends, how its fsyncs happen, when its envelopes leave) and call these
(tests/raftpart/router.py is the reference driver of the same rules).

Invariants, enforced here:
- rule 1: no input reaches a core with stages left (`call_core` raises: a driver bug);
- a stage runs only after the fsync of the stage before it (`needs_flush` cleared by the
  driver's fsync) and after the election state it asked for is durable (`persist` cleared);
- rule 1 across a restart: a replica counts nothing of its log that is not fsynced
  (`recovery_flush` before the core reads the log).

What stays in the drivers, and why it differs: the runtime keeps a stage's election state
pending (`persist`) until the round's ONE grouped write of every partition's election state
(partition/raft/election_states.py), so `run_stages` is called without `write_election_state`;
the simulator writes each partition's election state at once after its log's fsync (the
partition's own quorum-state file), passing `write_election_state`. The runtime ships a
round's envelopes after every pass and fsyncs synchronously; the simulator ships once per round
and its fsync takes simulated time.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar

from harness.drive.effects import EffectEnv, execute_effects
from partition.log import PartitionLog
from partition.raft import (
    RaftPartitionInput,
    RaftPartitionLog,
    RaftReplica,
    Stage,
    execute_partition_effects,
    flush_stages,
)
from partition.raft.effects import PartitionEffectEnv, RaftEffect
from quorum.raft.effects import ElectionState
from quorum.raft.log import OffsetAndEpoch


class StagedReplica(PartitionEffectEnv, Protocol):
    """One hosted raft-partition replica as the round discipline sees it."""

    @property
    def key(self) -> tuple[str, int]: ...

    core: RaftReplica
    stages: list[Stage]
    needs_flush: bool  # its log must be fsynced before the next stage runs
    persist: ElectionState | None  # to make durable (after that fsync) before the next stage


def has_stages(r: StagedReplica) -> bool:
    """Stages of an earlier call are left (or its fsync or election-state write): no input may
    reach the core now (rule 1)."""
    return r.needs_flush or r.persist is not None or bool(r.stages)


def call_core(r: StagedReplica, message: RaftPartitionInput | None, now_ms: int) -> None:
    """One input (None: a tick) into a core that has no stages left; its effects become the
    replica's stages (run them with `run_stages`)."""
    if has_stages(r):
        raise AssertionError(f"{r.key}: an input reached a core with stages left (rule 1)")
    effects = r.core.tick(now_ms) if message is None else r.core.handle(message, now_ms)
    r.stages = flush_stages(effects) if effects else []


def run_stages(r: StagedReplica,
               write_election_state: Callable[[ElectionState], None] | None = None) -> None:  # fmt: skip
    """Run the replica's stages in order until one needs an fsync (`needs_flush`) or, without
    `write_election_state`, an election-state write (`persist`, grouped by the driver). With it,
    a stage's election state is written as soon as the log's fsync before it is done."""
    while True:
        if r.persist is not None and not r.needs_flush and write_election_state is not None:
            write_election_state(r.persist)  # durable (tmp, fsync, rename) when it returns
            r.persist = None
        if not r.stages or r.needs_flush or r.persist is not None:
            return
        stage = r.stages.pop(0)
        execute_partition_effects(stage.effects, r)
        r.needs_flush = stage.flush_after
        r.persist = stage.persist


R = TypeVar("R", bound=StagedReplica)


def waits_for_durability(r: StagedReplica) -> bool:
    """Its last stage left its log to fsync or its election state to write."""
    return r.needs_flush or r.persist is not None


def run_round(touched: Mapping[Any, R], feed: Callable[[R], None],
              make_durable: Callable[[list[R]], bool], advance: Callable[[R], None],
              after_pass: Callable[[], None] | None = None) -> None:  # fmt: skip
    """The passes of a round's end, until nothing is left to run: `feed` every replica the round
    touched what waits for it (it may touch more: `touched` is read again each pass), then
    `after_pass` (the runtime puts the envelopes of what ran on the wire: rule 2), then make the
    logs and election states the stages left waiting durable, once each for the pass
    (`make_durable`; False: that completes later, as the simulator's fsync takes simulated
    time), and `advance` those replicas to their next stages."""
    while True:
        for r in list(touched.values()):
            feed(r)
        if after_pass is not None:
            after_pass()
        dirty = [r for r in touched.values() if waits_for_durability(r)]
        if not dirty or not make_durable(dirty):
            return
        for r in dirty:
            advance(r)


def recovery_flush(plog: PartitionLog) -> None:
    """fsync what a log holds beyond its recovery point before its replica counts any of it.

    After a kill -9 the page cache still holds appends the killed process never fsynced; the
    recovered log shows them, and the replica's first fetch would count them toward a majority,
    while a power loss before their next fsync would take them away, committed."""
    if plog.log_end_offset == plog.log_start_offset:
        return
    for segment in plog.segments:
        if segment.next_offset > plog.recovery_point:
            segment.flush()
    plog.storage.fsync_dir(plog.directory)


class HostedReplica:
    """The effect environments of one hosted raft-partition replica where both drivers agree
    (harness.drive.effects.EffectEnv, partition.raft.PartitionEffectEnv); a driver's dataclass
    adds its fields and `send`, `persist_election_state`, `on_leader_changed`,
    `complete_produce` and `answer_consumer_fetch`."""

    store: RaftPartitionLog

    @property
    def log(self) -> RaftPartitionLog:
        return self.store

    def on_commit_advanced(self, high_watermark: int) -> None:
        self.store.update_high_watermark(high_watermark)

    def on_read_barrier(self, effect: Any) -> None:
        raise AssertionError(f"raft partitions take no read barriers: {effect}")

    def on_snapshot_installed(self, snapshot: OffsetAndEpoch) -> None:
        raise AssertionError(f"raft partitions install no snapshots: {snapshot}")

    def run_raft_effects(self: EffectEnv, effects: list[RaftEffect]) -> None:
        execute_effects(effects, self)
