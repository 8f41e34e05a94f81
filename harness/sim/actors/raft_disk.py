"""What a simulated Raft node keeps on its simulated disk (its SimStorage), as its driver sees it:

- `ObservedLog`: the Raft log. Every write goes to the RaftLogStore (partition.raft.log) and
  is shown to the SafetyChecker (harness.sim.checks.invariants) at the moment it matters: an
  append before it happens (LogMatching against the global index), a truncation before it
  happens (never below the node's HW), a flush after it completed (what is durable now). The
  store's own contract (quorum/raft/log.py) is checked on the spot: after an append the log ends
  one past the last entry, after truncate_to(n) it ends at n; a store that breaks it fails the
  run as `LogContract`.
- `SimQuorumStateStore`: the `quorum-state` file, the durable election state (epoch, voted id,
  leader id), written the way the runtime writes the real one (KIP-595: durable before a vote is
  granted): write `quorum-state.tmp`, fsync it, rename it over `quorum-state`, fsync the
  directory. A crash between those steps leaves the old state, never a torn one.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from harness.sim.checks.invariants import SafetyChecker
from partition.log.storage import SimStorage, read_whole
from partition.raft.log import RaftLogStore
from quorum.raft.effects import ElectionState
from quorum.raft.log import Entry, OffsetAndEpoch

STATE_DIRECTORY = "meta"
STATE_PATH = f"{STATE_DIRECTORY}/quorum-state"

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


class SimQuorumStateStore:
    """Reads and atomically writes the election state on simulated storage."""

    __slots__ = ("_storage", "writes")

    def __init__(self, storage: SimStorage) -> None:
        self._storage = storage
        self._storage.make_dirs(STATE_DIRECTORY)
        self.writes = 0

    def read(self) -> ElectionState:
        """The durable state, or epoch 0 with no vote when it was never written."""
        if not self._storage.exists(STATE_PATH):
            return ElectionState(epoch=0)
        doc = json.loads(read_whole(self._storage, STATE_PATH))
        return ElectionState(
            epoch=int(doc["leaderEpoch"]),
            voted_id=None if doc["votedId"] < 0 else int(doc["votedId"]),
            leader_id=None if doc["leaderId"] < 0 else int(doc["leaderId"]),
        )

    def write(self, state: ElectionState) -> None:
        doc = {
            "leaderEpoch": state.epoch,
            "votedId": -1 if state.voted_id is None else state.voted_id,
            "leaderId": -1 if state.leader_id is None else state.leader_id,
        }
        tmp = STATE_PATH + ".tmp"
        if self._storage.exists(tmp):
            self._storage.remove(tmp)
        handle = self._storage.open(tmp)
        handle.append(json.dumps(doc, sort_keys=True).encode())
        handle.fsync()
        handle.close()
        self._storage.rename(tmp, STATE_PATH)
        self._storage.fsync_dir(STATE_DIRECTORY)
        self.writes += 1
