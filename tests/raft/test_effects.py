"""harness.drive.effects.execute_effects: the durability order both drivers rely on."""

from __future__ import annotations

from typing import Any

from harness.drive.effects import execute_effects
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
    Send,
    TruncateLog,
    WriteSnapshotChunk,
)
from quorum.raft.log import Entry, OffsetAndEpoch
from tests.raft.memlog import MemLog


class RecordingLog(MemLog):
    def __init__(self, journal: list[str]) -> None:
        super().__init__()
        self.journal = journal

    def append(self, entries: Any) -> None:
        self.journal.append(f"append {entries[0].offset}")
        super().append(entries)

    def flush(self) -> None:
        self.journal.append("flush")
        super().flush()

    def truncate_to(self, end_offset: int) -> None:
        self.journal.append(f"truncate {end_offset}")
        super().truncate_to(end_offset)


class Env:
    def __init__(self) -> None:
        self.journal: list[str] = []
        self.log = RecordingLog(self.journal)

    def send(self, to: int, message: Any) -> None:
        self.journal.append(f"send {to}")

    def persist_election_state(self, state: ElectionState) -> None:
        self.journal.append(f"persist {state.epoch}")

    def on_commit_advanced(self, high_watermark: int) -> None:
        self.journal.append(f"commit {high_watermark}")

    def on_leader_changed(self, effect: LeaderChanged) -> None:
        self.journal.append(f"leader {effect.leader_id}")

    def on_read_barrier(self, effect: Any) -> None:
        self.journal.append(f"barrier {effect.request_id}")

    def on_snapshot_installed(self, snapshot: OffsetAndEpoch) -> None:
        self.journal.append(f"installed {snapshot.offset}")


def entry(offset: int) -> Entry:
    return Entry(offset, 1, b"x")


def test_appends_are_group_committed_but_always_flushed_before_the_next_send() -> None:
    env = Env()
    effects: list[Effect] = [
        PersistElectionState(ElectionState(1, 1, 1)),
        AppendToLog((entry(0),), flush=True),
        AppendToLog((entry(1),), flush=True),
        Send(2, "fetch-answer"),
        CommitAdvanced(2),
        AppendToLog((entry(2),), flush=True),
    ]
    execute_effects(effects, env)
    assert env.journal == [
        "persist 1",
        "append 0",
        "append 1",
        "flush",  # one fsync for both appends, before the send that depends on them
        "send 2",
        "commit 2",
        "append 2",
        "flush",  # the trailing append is durable when execute_effects returns
    ]
    assert env.log.flushed_end == 3


def test_unflushed_appends_do_not_fsync() -> None:
    env = Env()
    execute_effects([AppendToLog((entry(0),), flush=False), Send(1, "ack")], env)
    assert env.journal == ["append 0", "send 1"]


def test_every_effect_kind_reaches_the_env_or_the_log() -> None:
    env = Env()
    snap = OffsetAndEpoch(2, 1)
    env.log.append([entry(0), entry(1), entry(2)])
    execute_effects(
        [
            TruncateLog(2),
            LeaderChanged(3, 2, False),
            ReadBarrierCompleted(9, 2),
            WriteSnapshotChunk(snap, 0, b"abc"),
            InstallSnapshot(snap),
            DeleteLogPrefix(2),
        ],
        env,
    )
    assert env.journal == ["append 0", "truncate 2", "leader 2", "barrier 9", "installed 2"]
    assert env.log.snapshots[snap] == b"abc" and env.log.start_offset == 2


def test_flush_log_pushes_queued_sends_first_then_fsyncs_once() -> None:
    env = Env()
    env.flush_sends = lambda: env.journal.append("flush_sends")  # type: ignore[attr-defined]
    execute_effects(
        [AppendToLog((entry(0),), flush=False), Send(2, "records"), FlushLog(), CommitAdvanced(1)],
        env,
    )
    assert env.journal == ["append 0", "send 2", "flush_sends", "flush", "commit 1"]
