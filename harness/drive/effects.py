"""The ONE executor of Raft core effects, shared by the asyncio node (harness/node) and the
simulator (harness/sim) so the two drivers cannot drift apart.

Ordering contract (quorum/raft/effects.py, etcd-io/raft's Ready): effects run one after another,
synchronously, in list order, and all of them before the core gets its next input. fsyncs are
group-committed: consecutive AppendToLog(flush=True) effects are appended at once and fsynced
together, but ALWAYS before the next effect of any other kind runs (so never after a Send, a
CommitAdvanced or a persist that follows them), and before `execute_effects` returns.
PersistElectionState is durable (tmp, fsync, rename) when `persist_election_state` returns.
FlushLog fsyncs the log; before it, the optional env hook `flush_sends()` (if the env has one)
lets a driver that queues sends put them on the wire, so a leader's replication overlaps its own
fsync. The core only places Sends of already-appended records before a FlushLog.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol, assert_never

from quorum.raft.effects import (
    AppendToLog,
    CommitAdvanced,
    DeleteLogPrefix,
    Effect,
    ElectionState,
    FlushLog,
    InstallSnapshot,
    LeaderChanged,
    PersistElectionState,
    ReadBarrierCompleted,
    ReadBarrierFailed,
    Send,
    TruncateLog,
    VoterChangeCompleted,
    VotersChanged,
    WriteSnapshotChunk,
)
from quorum.raft.log import OffsetAndEpoch, RaftLogWriter


class EffectEnv(Protocol):
    """What a driver provides to run effects. Callbacks must not call back into the core."""

    @property
    def log(self) -> RaftLogWriter: ...

    def send(self, to: int, message: Any) -> None:
        """Best effort; never blocks on the network (queue it)."""

    def persist_election_state(self, state: ElectionState) -> None:
        """Write the quorum-state file durably (tmp, fsync, rename, fsync dir) before returning."""

    def on_commit_advanced(self, high_watermark: int) -> None:
        """Entries below `high_watermark` are committed: apply them to the state machine."""

    def on_leader_changed(self, effect: LeaderChanged) -> None:
        """New epoch/leader; a node that stopped leading fails its waiting proposals as unknown."""

    def on_read_barrier(self, effect: ReadBarrierCompleted | ReadBarrierFailed) -> None:
        """Answer (or fail) the linearizable read waiting on effect.request_id."""

    def on_snapshot_installed(self, snapshot: OffsetAndEpoch) -> None:
        """Restore the state machine from the snapshot just published (state as of its offset)."""

    # Optional hooks (KIP-853; drivers without voter changes leave them out):
    #   on_voters_changed(voters: VotersRecord): the voter set in force changed (reach the
    #       new voters at their endpoints);
    #   on_voter_change_completed(effect: VoterChangeCompleted): answer that add/remove/update.


def _flush_sends(env: EffectEnv) -> None:
    """Optional driver hook `flush_sends()`: put queued Sends on the wire now (non-blocking),
    before a blocking fsync, so that followers receive and fsync in parallel with the leader."""
    hook = getattr(env, "flush_sends", None)
    if hook is not None:
        hook()


def execute_effects(effects: Iterable[Effect], env: EffectEnv) -> None:
    """Run `effects` in order against `env`, honouring the durability contract above."""
    log = env.log
    unflushed = False
    for effect in effects:
        # The four kinds of a steady commit by exact type first (effects are final classes),
        # the rest through the match below.
        if type(effect) is AppendToLog:  # (`type(...) is`, not a local: it narrows for mypy)
            log.append(effect.entries)
            unflushed = unflushed or effect.flush
            continue
        if type(effect) is FlushLog:
            _flush_sends(env)  # the followers' copies travel while we fsync ours
            log.flush()
            unflushed = False
            continue
        if unflushed:
            log.flush()  # group commit: one fsync for every append before this effect
            unflushed = False
        if type(effect) is Send:
            env.send(effect.to, effect.message)
            continue
        if type(effect) is CommitAdvanced:
            env.on_commit_advanced(effect.high_watermark)
            continue
        match effect:
            case PersistElectionState(state=state):
                env.persist_election_state(state)
            case TruncateLog(end_offset=end_offset):
                log.truncate_to(end_offset)
            case LeaderChanged():
                env.on_leader_changed(effect)
            case ReadBarrierCompleted() | ReadBarrierFailed():
                env.on_read_barrier(effect)
            case WriteSnapshotChunk(snapshot=snapshot, position=position, data=data):
                log.write_snapshot_chunk(snapshot, position, data)
            case InstallSnapshot(snapshot=snapshot):
                log.complete_snapshot(snapshot)
                env.on_snapshot_installed(snapshot)
            case DeleteLogPrefix(before_offset=offset):
                log.delete_before(offset)
            case VotersChanged(voters=voters):
                hook = getattr(env, "on_voters_changed", None)
                if hook is not None:
                    hook(voters)
            case VoterChangeCompleted():
                hook = getattr(env, "on_voter_change_completed", None)
                if hook is not None:
                    hook(effect)
            case AppendToLog() | FlushLog() | Send() | CommitAdvanced():
                raise AssertionError("unreachable")  # handled above; kept for exhaustiveness
            case _:
                assert_never(effect)
    if unflushed:
        log.flush()
