"""The I/O-free part of the raft-partition round discipline both drivers run (partition/raft/
effects.py "Rules for such a driver"): one input into a replica's core, its effects cut into
stages, and the stages run up to the next fsync or election-state write. The asyncio runtime
(harness/runtime/raft_partitions.py) and the simulator (harness/sim/actors/raft_host.py) keep
their rounds (when a round ends, how its fsyncs happen, when its envelopes leave) and call these
for each replica (tests/raftpart/router.py is the reference driver of the same rules).

Invariants, enforced here:
- rule 1: no input reaches a core with stages left (`call_core` raises: a driver bug);
- a stage runs only after the fsync of the stage before it (`needs_flush` cleared by the
  driver's fsync) and after the election state it asked for is durable (`persist` cleared).

What stays in the drivers, and why it differs: the runtime keeps a stage's election state
pending (`persist`) until the round's ONE grouped write of every partition's election state
(partition/raft/election_states.py), so `run_stages` is called without `write_election_state`;
the simulator writes each partition's election state at once after its log's fsync (the
partition's own quorum-state file), passing `write_election_state`. The runtime ships a
round's envelopes after every pass and fsyncs synchronously; the simulator ships once per round
and its fsync takes simulated time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from partition.raft import (
    RaftPartitionInput,
    RaftReplica,
    Stage,
    execute_partition_effects,
    flush_stages,
)
from partition.raft.effects import PartitionEffectEnv
from quorum.raft.effects import ElectionState


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
