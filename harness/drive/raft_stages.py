"""The stage discipline of one raft-partition replica (partition/raft/effects.py "Rules for such
a driver"): one input into a replica's core, its effects cut into stages, and the stages run up
to the next fsync or election-state write (`call_core`, `run_stages`); the effect environment
every hosted replica shares (`HostedReplica`); the recovery flush of a log a replica is
(re)built on (`recovery_flush`). The round around them (when inputs wait, the grouped fsyncs,
the envelopes, the timers) is the one raft-partition host's, harness/drive/raft_host.py.

Invariants, enforced here:
- rule 1: no input reaches a core with stages left (`call_core` raises: a driver bug);
- a stage runs only after the fsync of the stage before it (`needs_flush` cleared by the
  host's durability port) and after the election state it asked for is durable (`persist`
  cleared);
- rule 1 across a restart: a replica counts nothing of its log that is not fsynced
  (`recovery_flush` before the core reads the log).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from harness.drive.effects import EffectEnv, execute_effects
from partition.log import PartitionLog
from partition.raft import (
    Effect,
    RaftLogStore,
    RaftPartitionInput,
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


def call_core(r: StagedReplica, message: RaftPartitionInput | None, now_ms: int) -> list[Effect]:
    """One input (None: a tick) into a core that has no stages left; its effects (returned)
    become the replica's stages (run them with `run_stages`)."""
    if has_stages(r):
        raise AssertionError(f"{r.key}: an input reached a core with stages left (rule 1)")
    effects = r.core.tick(now_ms) if message is None else r.core.handle(message, now_ms)
    r.stages = flush_stages(effects) if effects else []
    return effects


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


def waits_for_durability(r: StagedReplica) -> bool:
    """Its last stage left its log to fsync or its election state to write."""
    return r.needs_flush or r.persist is not None


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

    store: RaftLogStore

    @property
    def log(self) -> RaftLogStore:
        return self.store

    def on_commit_advanced(self, high_watermark: int) -> None:
        self.store.update_high_watermark(high_watermark)

    def on_read_barrier(self, effect: Any) -> None:
        raise AssertionError(f"raft partitions take no read barriers: {effect}")

    def on_snapshot_installed(self, snapshot: OffsetAndEpoch) -> None:
        raise AssertionError(f"raft partitions install no snapshots: {snapshot}")

    def run_raft_effects(self: EffectEnv, effects: list[RaftEffect]) -> None:
        execute_effects(effects, self)
