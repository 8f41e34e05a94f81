"""The Raft core's view of its log: a small protocol of its own (quorum/ imports
nothing from partition/). The runtimes wire it to partition/log (real files, or simulated storage
in harness/sim) through partition/raft/log.py.

The core only *reads* through `RaftLog`. It writes through effects (quorum.raft.effects), which a
driver executes in order, synchronously, before the core sees its next input; `RaftLogWriter` is
what the drivers call to do so.

Invariants the implementations keep:
- offsets are dense: entries occupy [start_offset, end_offset); an entry spans `count` offsets
  ([offset, last_offset]; the metadata log's entries span one, a data partition's entry is one
  Kafka batch, partition/raft/entries.py), and spans never overlap or leave a hole;
- epochs never decrease along the log;
- after `truncate_to(n)`, end_offset == n and the epoch cache holds no epoch starting at >= n;
- `flush()` makes everything appended so far survive a crash; unflushed entries may vanish
  (from the tail only: a crash never leaves a hole).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class Entry:
    """One Raft log entry, spanning the `count` offsets [offset, last_offset]. `data` is opaque to
    Raft unless `control` is set, in which case it is a control record of the quorum layer
    (LeaderChange, no-op; those span one offset). Raft treats a span as one entry: it is appended,
    replicated and truncated whole (a truncation point is never inside one), and every offset of
    it has its epoch."""

    offset: int
    epoch: int
    data: bytes
    control: bool = False
    count: int = 1

    @property
    def last_offset(self) -> int:
        return self.offset + self.count - 1

    @property
    def next_offset(self) -> int:
        """The offset after the span (where the next entry starts)."""
        return self.offset + self.count


@dataclass(frozen=True, slots=True, order=True)
class OffsetAndEpoch:
    """A position in the log. For a snapshot: `offset` is its end offset (exclusive, the first
    offset not in it) and `epoch` the epoch of the last entry it covers, as in KIP-630."""

    offset: int
    epoch: int


class RaftLog(Protocol):
    """Read-only view of the Raft log, as the core sees it."""

    @property
    def start_offset(self) -> int:
        """First offset held in the log (the newest snapshot's end offset after prefix deletion)."""
        ...

    @property
    def end_offset(self) -> int:
        """Log end offset (LEO): one past the last entry."""
        ...

    def last_epoch(self) -> int:
        """Epoch of the last entry; of the newest snapshot when the log is empty; 0 when neither."""
        ...

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        """Kafka's `endOffsetForEpoch`: the largest epoch E <= `epoch` known to the log and the end
        offset of E (the start offset of the next larger epoch, or the LEO if E is the last).
        Returns OffsetAndEpoch(-1, -1) when no epoch <= `epoch` is known (below the log start and
        not the snapshot's epoch)."""
        ...

    def read(self, start_offset: int, max_bytes: int) -> list[Entry]:
        """Entries from the one holding `start_offset` on (it may start below it, inside a span),
        at least one if any exists, then up to `max_bytes` of data in total. Raises ValueError
        outside [start_offset, end_offset]."""
        ...

    def latest_snapshot(self) -> OffsetAndEpoch | None:
        """The newest complete snapshot, or None."""
        ...

    def snapshot_size(self, snapshot: OffsetAndEpoch) -> int:
        """Size in bytes of a complete snapshot."""
        ...

    def read_snapshot(self, snapshot: OffsetAndEpoch, position: int, max_bytes: int) -> bytes:
        """Up to `max_bytes` of a complete snapshot from `position` (for FetchSnapshot)."""
        ...


class RaftLogWriter(RaftLog, Protocol):
    """What drivers call to execute the core's log effects. Never called by the core."""

    def append(self, entries: Sequence[Entry]) -> None:
        """Append entries whose spans continue the log exactly (entries[0].offset == end_offset,
        each next entry at the previous one's next_offset)."""
        ...

    def flush(self) -> None:
        """fsync everything appended so far."""
        ...

    def truncate_to(self, end_offset: int) -> None:
        """Remove every entry at or above `end_offset` (a follower after divergence)."""
        ...

    def write_snapshot(self, snapshot: OffsetAndEpoch, data: bytes) -> None:
        """Durably store a complete snapshot taken locally (tmp, fsync, rename, fsync dir)."""
        ...

    def write_snapshot_chunk(self, snapshot: OffsetAndEpoch, position: int, data: bytes) -> None:
        """Write a chunk of a snapshot being fetched from the leader (a `.part` file);
        `position` must equal the bytes written so far."""
        ...

    def complete_snapshot(self, snapshot: OffsetAndEpoch) -> None:
        """Publish a fetched snapshot (fsync, rename `.part`), then, if the log does not already
        hold entry snapshot.offset-1 with epoch snapshot.epoch, reset the log to empty with
        start_offset == end_offset == snapshot.offset."""
        ...

    def delete_before(self, offset: int) -> None:
        """Delete log prefix below `offset` (never past the newest snapshot's end offset).
        The core only passes the end offset of a snapshot the log holds, so the log start is
        always at a snapshot boundary and the epoch just below it is that snapshot's epoch."""
        ...
