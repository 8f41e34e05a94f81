"""What a raft-mode replica asks its driver to do, and how a driver runs it.

`RaftReplica` returns ONE ordered list mixing:
- the Raft core's effects (quorum.raft.effects: Send, PersistElectionState, AppendToLog, FlushLog,
  TruncateLog, CommitAdvanced, LeaderChanged), unchanged; and
- the partition's answers to clients, `CompleteProduce` and `SendFetchResponse` (to the consumer,
  CONSUMER_REPLICA_ID), the types of partition.replica.effects, so the Kafka listener and the
  admin API answer raft partitions as they answer the other modes.

The order is the durability contract, as for every core (quorum/raft/effects.py): an acks=1
answer follows the AppendToLog of its batch; an acks=all answer follows the CommitAdvanced that
passes its last offset, which the Raft core places after the FlushLog of the leader's own copy,
and which it emits only once a majority of voters fetched past it, each having flushed before
fetching (AppendToLog(flush=True) comes before the next Send(FetchRequest)).

`execute_partition_effects(effects, env)` runs a list in order: each run of consecutive Raft
effects goes to `env.run_raft_effects`, which the driver binds to harness/drive/effects.py
`execute_effects` (the one Raft executor) with a per-partition env whose `send` hands the message
to the broker's RaftMux (partition.raft.mux); client answers go to the env's callbacks.

Grouped flushes (`flush_stages`): a broker hosting many raft partitions should not fsync once per
partition per input. `flush_stages` cuts one call's effect list where `execute_effects` would
fsync (after a FlushLog; after an AppendToLog(flush=True) before the next non-append effect; at
a PersistElectionState, which must be durable before what follows it: a vote before the
VoteResponse that grants it), and turns those fsyncs into `Stage.flush_after` and
`Stage.persist`. A driver then runs, per event-loop round:

    stage 0 of every partition that got an input this round,
    one fsync per log whose stage 0 says flush_after (all logs in parallel, or one syncfs), and
    the election states of every stage 0 that says persist made durable (one write for all of
    them where the driver keeps them together; the log's fsync first where a stage has both),
    stage 1 of those partitions, and so on.

Rules for such a driver:
1. No input reaches a core while it has stages left: run them first (fsync its log, then the
   rest). RaftCore reads its log end at the start of every call (`RaftLog.end_offset`); if that
   included appends not yet fsynced, a leader would count them toward the majority: the planted
   bug of tests/raftpart/test_planted.py, which loses acknowledged writes on power loss.
2. Messages sent in a stage may leave as soon as that stage ran: a Send depends only on the
   flushes that precede it, which belong to earlier stages.
3. A crash between stages loses only what was not yet flushed, and nothing after the cut was
   acted on (no fetch acknowledged it, no client was answered).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol, TypeGuard

from partition.replica.effects import CompleteProduce, SendFetchResponse
from partition.replica.messages import FetchResponse, ProduceResponse
from quorum.raft.effects import AppendToLog, ElectionState, FlushLog, PersistElectionState
from quorum.raft.effects import Effect as RaftEffect

__all__ = [
    "Effect",
    "PartitionEffect",
    "PartitionEffectEnv",
    "RaftEffect",
    "Stage",
    "execute_partition_effects",
    "flush_stages",
    "is_partition_effect",
]

PartitionEffect = CompleteProduce | SendFetchResponse
Effect = RaftEffect | PartitionEffect


def is_partition_effect(effect: Effect) -> TypeGuard[PartitionEffect]:
    return isinstance(effect, CompleteProduce | SendFetchResponse)


class PartitionEffectEnv(Protocol):
    """What a driver provides to run one raft partition's effects."""

    def run_raft_effects(self, effects: list[RaftEffect]) -> None:
        """Run Raft effects in order with their durability contract (harness/drive/effects.py)."""

    def complete_produce(self, response: ProduceResponse) -> None:
        """Answer the produce request `response.request_id`."""

    def answer_consumer_fetch(self, response: FetchResponse) -> None:
        """Answer the consumer fetch `response.request_id`."""


def execute_partition_effects(effects: Iterable[Effect], env: PartitionEffectEnv) -> None:
    """Run `effects` in order: Raft runs through `env.run_raft_effects`, answers to clients
    through the env's callbacks."""
    run: list[RaftEffect] = []
    for effect in effects:
        if isinstance(effect, CompleteProduce | SendFetchResponse):
            if run:
                env.run_raft_effects(run)
                run = []
            if isinstance(effect, CompleteProduce):
                env.complete_produce(effect.response)
            else:
                env.answer_consumer_fetch(effect.response)
        else:
            run.append(effect)
    if run:
        env.run_raft_effects(run)


@dataclass(frozen=True, slots=True)
class Stage:
    """Effects to run as they are (no AppendToLog in it asks for a flush, no FlushLog, no
    PersistElectionState), then, before the next stage runs: if `flush_after`, an fsync of the
    partition's log; then, if `persist`, that election state made durable (the partition's
    PersistElectionState)."""

    effects: tuple[Effect, ...]
    flush_after: bool
    persist: ElectionState | None = None


def flush_stages(effects: Iterable[Effect]) -> list[Stage]:
    """Cut `effects` at its fsync points (see the module docstring). Running the stages in order
    with an fsync wherever `flush_after` is set does exactly what `execute_effects` would."""
    stages: list[Stage] = []
    current: list[Effect] = []
    dirty = False  # an AppendToLog(flush=True) in `current` awaits its fsync

    def close(flush_after: bool, persist: ElectionState | None = None) -> None:
        nonlocal current, dirty
        if current or flush_after or persist is not None:
            stages.append(Stage(tuple(current), flush_after, persist))
        current, dirty = [], False

    for effect in effects:
        if isinstance(effect, AppendToLog):
            current.append(AppendToLog(effect.entries, flush=False) if effect.flush else effect)
            dirty = dirty or effect.flush
        elif isinstance(effect, FlushLog):
            close(True)
        elif isinstance(effect, PersistElectionState):
            close(dirty, effect.state)
        else:
            if dirty:
                close(True)
            current.append(effect)
    close(dirty)
    return stages
