"""A simulated node's Raft log as its driver sees it: every write goes to the RaftLogStore
(harness.drive.raftlog) and is shown to the SafetyChecker (harness.sim.checks.invariants) at the
moment it matters: an append before it happens (LogMatching against the global index), a
truncation before it happens (never below the node's HW), a flush after it completed (what is
durable now).

Invariant: the store's own contract (quorum/raft/log.py) is checked on the spot: after an append
the log ends one past the last entry, after truncate_to(n) it ends at n; a store that breaks it
fails the run as `LogContract`.
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.drive.raftlog import RaftLogStore
from harness.sim.checks.invariants import SafetyChecker
from quorum.raft.log import Entry, OffsetAndEpoch


class ObservedLog:
    """The node's RaftLogWriter as the driver sees it: forwards to the store and shows every
    write to the SafetyChecker (LogMatching before an append, the HW floor before a truncation,
    the durable end after a flush)."""

    def __init__(self, node_id: int, store: RaftLogStore, checker: SafetyChecker) -> None:
        self._node_id = node_id
        self._store = store
        self._checker = checker

    # -- RaftLog: reads go straight to the store ------------------------------------------------

    @property
    def start_offset(self) -> int:
        return self._store.start_offset

    @property
    def end_offset(self) -> int:
        return self._store.end_offset

    def last_epoch(self) -> int:
        return self._store.last_epoch()

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        return self._store.end_offset_for_epoch(epoch)

    def read(self, start_offset: int, max_bytes: int) -> list[Entry]:
        return self._store.read(start_offset, max_bytes)

    def latest_snapshot(self) -> OffsetAndEpoch | None:
        return self._store.latest_snapshot()

    def snapshot_size(self, snapshot: OffsetAndEpoch) -> int:
        return self._store.snapshot_size(snapshot)

    def read_snapshot(self, snapshot: OffsetAndEpoch, position: int, max_bytes: int) -> bytes:
        return self._store.read_snapshot(snapshot, position, max_bytes)

    # -- RaftLogWriter: writes are shown to the checker -----------------------------------------

    def append(self, entries: Sequence[Entry]) -> None:
        self._checker.on_append(self._node_id, entries, self._store)
        self._store.append(entries)
        if entries and self._store.end_offset != entries[-1].offset + 1:
            self._checker.fail(
                "LogContract",
                self._node_id,
                f"append up to {entries[-1].offset} left log end {self._store.end_offset}",
            )

    def flush(self) -> None:
        self._store.flush()
        self._checker.on_flush(self._node_id, self._store)

    def truncate_to(self, end_offset: int) -> None:
        self._checker.on_truncate(self._node_id, end_offset)
        expected = min(end_offset, self._store.end_offset)
        self._store.truncate_to(end_offset)
        if self._store.end_offset != expected:
            # quorum/raft/log.py: after truncate_to(n), end_offset == n.
            self._checker.fail(
                "LogContract",
                self._node_id,
                f"truncate_to({end_offset}) left log end {self._store.end_offset}",
            )

    def write_snapshot(self, snapshot: OffsetAndEpoch, data: bytes) -> None:
        self._store.write_snapshot(snapshot, data)

    def write_snapshot_chunk(self, snapshot: OffsetAndEpoch, position: int, data: bytes) -> None:
        self._store.write_snapshot_chunk(snapshot, position, data)

    def complete_snapshot(self, snapshot: OffsetAndEpoch) -> None:
        self._store.complete_snapshot(snapshot)

    def delete_before(self, offset: int) -> None:
        self._checker.count("delete_prefix")
        self._store.delete_before(offset)
