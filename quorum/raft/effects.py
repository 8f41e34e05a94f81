"""What the Raft core asks its driver to do. Effects are returned as an ordered list and the order
is the durability contract (etcd-io/raft's Ready; KIP-595): a driver executes them one after
another, synchronously, before the core sees its next input, so a vote or a fetch that depends on
persisted state is never sent before the persist it depends on.

harness/drive/effects.py holds the one `execute_effects` both drivers (asyncio node, simulator) use.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from quorum.raft.log import Entry, OffsetAndEpoch
from quorum.raft.messages import ErrorCode
from quorum.raft.voters import VotersRecord


@dataclass(frozen=True, slots=True)
class ElectionState:
    """The durable quorum state (Kafka's `quorum-state` file): written and fsynced before a vote
    is granted, a candidacy starts, or a leader is recognised in a new epoch."""

    epoch: int
    voted_id: int | None = None
    leader_id: int | None = None


@dataclass(frozen=True, slots=True)
class Send:
    """Send `message` (a frozen dataclass of quorum.raft.messages) to node `to`. Best effort:
    a lost message is the network's business; the core retries on its own timers."""

    to: int
    message: Any


@dataclass(frozen=True, slots=True)
class PersistElectionState:
    """Write and fsync the quorum-state file atomically before executing anything after this."""

    state: ElectionState


@dataclass(frozen=True, slots=True)
class AppendToLog:
    """Append entries at the log end. `flush` asks for an fsync before the next effect runs."""

    entries: tuple[Entry, ...]
    flush: bool


@dataclass(frozen=True, slots=True)
class FlushLog:
    """fsync everything appended so far before the next effect runs. A leader appends with
    flush=False, sends the new records to its parked followers, then flushes: replication
    overlaps its own fsync (Raft thesis 10.2.1), and it counts its own LEO for the high
    watermark only after this effect (every CommitAdvanced that depends on it comes later)."""


@dataclass(frozen=True, slots=True)
class TruncateLog:
    """Truncate the log to `end_offset` (divergence). Never below the high watermark."""

    end_offset: int


@dataclass(frozen=True, slots=True)
class CommitAdvanced:
    """The high watermark moved: entries below `high_watermark` are committed and may be
    applied to the state machine, in order."""

    high_watermark: int


@dataclass(frozen=True, slots=True)
class LeaderChanged:
    """This node learned of a new epoch or leader (leader_id None: unknown). A leader that
    stops leading fails its waiting proposals as indeterminate."""

    epoch: int
    leader_id: int | None
    is_self: bool


@dataclass(frozen=True, slots=True)
class ReadBarrierCompleted:
    """A majority confirmed this leader after the barrier was requested: a linearizable read may be
    answered once the state machine has applied everything below `high_watermark`."""

    request_id: int
    high_watermark: int


@dataclass(frozen=True, slots=True)
class ReadBarrierFailed:
    """The barrier could not be confirmed (not leader, or leadership lost)."""

    request_id: int
    leader_id: int | None
    epoch: int


@dataclass(frozen=True, slots=True)
class WriteSnapshotChunk:
    """A FetchSnapshot chunk to write at `position` of the snapshot being fetched."""

    snapshot: OffsetAndEpoch
    position: int
    data: bytes


@dataclass(frozen=True, slots=True)
class InstallSnapshot:
    """The fetched snapshot is complete: publish it, reset the log behind it, and restore the
    state machine from it (its state is then as of snapshot.offset)."""

    snapshot: OffsetAndEpoch


@dataclass(frozen=True, slots=True)
class DeleteLogPrefix:
    """Delete the log below `before_offset`, which is the end offset of a snapshot the log holds
    (so the log start stays at a snapshot boundary, KIP-630)."""

    before_offset: int


@dataclass(frozen=True, slots=True)
class VotersChanged:
    """The voter set in force changed (a VotersRecord appended, truncated away, or installed
    with a snapshot; KIP-853): drivers update where they reach the voters."""

    voters: VotersRecord


@dataclass(frozen=True, slots=True)
class VoterChangeCompleted:
    """The answer to add_voter / remove_voter / update_voter `request_id` (AddRaftVoter,
    RemoveRaftVoter, UpdateRaftVoter): NONE once the VotersRecord is committed; an error
    otherwise. NOT_LEADER_OR_FOLLOWER after the record was appended means the outcome is
    unknown (the next leader may still commit it)."""

    request_id: int
    error: ErrorCode
    message: str = ""


Effect = (
    Send
    | PersistElectionState
    | AppendToLog
    | FlushLog
    | TruncateLog
    | CommitAdvanced
    | LeaderChanged
    | ReadBarrierCompleted
    | ReadBarrierFailed
    | WriteSnapshotChunk
    | InstallSnapshot
    | DeleteLogPrefix
    | VotersChanged
    | VoterChangeCompleted
)
