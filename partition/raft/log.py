"""`RaftPartitionLog`: a data partition's PartitionLog as the Raft log of its partition's Raft group
(quorum.raft.log.RaftLogWriter), plus the data view the raft-mode replica core reads, plus the
partition's `quorum-state` file.

The mapping between batches and Raft entries is partition.raft.entries (one entry per batch,
spanning its offsets). Reads return whole batches; appends go through
PartitionLog.append_as_follower on every replica, the leader included: the bytes already carry
their offsets and epoch (patched from the entries), the log validates CRC, offsets and epochs,
records the epoch in the leader epoch cache (KIP-101), and keeps the idempotent producers' state
(KIP-98) for every appended batch, which is what the leader checks a produced batch against.

Like harness/drive/raftlog.py does for the metadata log, and unlike it: the data log keeps producer
batches whole (one Kafka batch per produce request), so a truncation point is always a batch
boundary (partition.raft.entries); `truncate_to` refuses any other (InvariantViolation) instead of
rewriting a cut batch. Raft snapshots (KIP-630) are not used by data partitions yet: there is no
state machine to snapshot, and log retention on a raft partition needs the log start to be a
"snapshot" boundary a lagging follower can jump to (docs/replication.md, Status), so the
snapshot methods raise and the driver must not apply retention to raft partitions yet.

The `quorum-state` file (Kafka's FileQuorumStateStore JSON, in the partition directory) holds the
partition's ElectionState. `persist_election_state` replaces it atomically (tmp, fsync, rename,
fsync dir): the driver calls it for PersistElectionState, before any later effect runs.

The partition's leader-epoch-checkpoint is written when the log flushes (LeaderEpochCache
write_on_flush): Raft flushes before an append is acknowledged, and an election among many
partitions then costs no extra fsync per partition on the driver's loop.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Protocol

from partition.log import batch as rb
from partition.log.checkpoint import write_atomically
from partition.log.errors import CheckpointError
from partition.log.log import PartitionLog
from partition.log.producer_state import CheckResult
from partition.log.storage import read_whole
from partition.raft.entries import batches_to_entries, entries_to_batches
from partition.replica.errors import InvariantViolation
from quorum.raft.effects import ElectionState
from quorum.raft.errors import RaftUsageError
from quorum.raft.log import Entry, OffsetAndEpoch, RaftLog, RaftLogWriter

__all__ = ["QUORUM_STATE_FILE", "RaftPartitionLog", "RaftPartitionView"]

QUORUM_STATE_FILE = "quorum-state"
_QUORUM_STATE_VERSION = 0


class RaftPartitionView(RaftLog, Protocol):
    """What a raft-mode replica core reads: the Raft log view, plus raw batches for consumers and
    the idempotence check for producers."""

    def read_batches(self, offset: int, max_bytes: int, max_offset: int) -> bytes:
        """Raw bytes of whole batches from `offset`, none reaching `max_offset` (the HW)."""
        ...

    def check_producer(
        self, producer_id: int, producer_epoch: int, first_seq: int, last_seq: int
    ) -> CheckResult:
        """The idempotence check of a produced batch against every appended batch (KIP-98)."""
        ...


class RaftPartitionLog:
    """RaftLogWriter + RaftPartitionView over one partition's PartitionLog."""

    def __init__(self, log: PartitionLog) -> None:
        self.log = log
        self.flush_count = 0
        # Every append counts toward the majority only after the driver's fsync of this log
        # (grouped per round), so the leader epoch checkpoint is written with that flush, not
        # once more per new epoch on the loop (partition/log/epoch_cache.py, write_on_flush).
        log.epoch_cache.write_on_flush()

    # -- RaftLog --------------------------------------------------------------------------------

    @property
    def start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def end_offset(self) -> int:
        return self.log.log_end_offset

    def last_epoch(self) -> int:
        if self.log.log_end_offset <= self.log.log_start_offset:
            return 0
        return max(0, self.log.epoch_cache.epoch_for_offset(self.log.log_end_offset - 1))

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        found, end = self.log.epoch_cache.end_offset_for(epoch, self.log.log_end_offset)
        return OffsetAndEpoch(end, found) if found >= 0 else OffsetAndEpoch(-1, -1)

    def read(self, start_offset: int, max_bytes: int) -> list[Entry]:
        start, end = self.log.log_start_offset, self.log.log_end_offset
        if not start <= start_offset <= end:
            raise ValueError(f"read at {start_offset} outside [{start}, {end}]")
        if start_offset == end:
            return []
        return batches_to_entries(self.log.read(start_offset, max(max_bytes, 1)))

    def latest_snapshot(self) -> OffsetAndEpoch | None:
        return None

    def snapshot_size(self, snapshot: OffsetAndEpoch) -> int:
        raise RaftUsageError(f"raft partitions keep no snapshots (asked for {snapshot})")

    def read_snapshot(self, snapshot: OffsetAndEpoch, position: int, max_bytes: int) -> bytes:
        raise RaftUsageError(f"raft partitions keep no snapshots (asked for {snapshot})")

    # -- RaftLogWriter --------------------------------------------------------------------------

    def append(self, entries: Sequence[Entry]) -> None:
        if not entries:
            return
        if entries[0].offset != self.log.log_end_offset:
            raise ValueError(
                f"append at {entries[0].offset}, the log end offset is {self.log.log_end_offset}"
            )
        self.log.append_as_follower(entries_to_batches(entries))

    def flush(self) -> None:
        self.flush_count += 1
        self.log.flush()

    def truncate_to(self, end_offset: int) -> None:
        if end_offset >= self.log.log_end_offset:
            return
        header = rb.read_header(self.log.read(end_offset, 1))
        if header.base_offset != end_offset:
            # A cut inside a batch would drop offsets below end_offset, possibly committed ones.
            raise InvariantViolation(
                f"truncation to {end_offset} inside the batch at {header.base_offset}"
            )
        self.log.truncate_to(end_offset)  # flushed, and producer state rebuilt, by the log

    def write_snapshot(self, snapshot: OffsetAndEpoch, data: bytes) -> None:
        raise RaftUsageError(f"raft partitions keep no snapshots (asked to write {snapshot})")

    def write_snapshot_chunk(self, snapshot: OffsetAndEpoch, position: int, data: bytes) -> None:
        raise RaftUsageError(f"raft partitions keep no snapshots (asked to write {snapshot})")

    def complete_snapshot(self, snapshot: OffsetAndEpoch) -> None:
        raise RaftUsageError(f"raft partitions keep no snapshots (asked to install {snapshot})")

    def delete_before(self, offset: int) -> None:
        raise RaftUsageError(f"raft partitions delete no prefix yet (asked for {offset})")

    # -- RaftPartitionView ----------------------------------------------------------------------

    def read_batches(self, offset: int, max_bytes: int, max_offset: int) -> bytes:
        return self.log.read(offset, max_bytes, max_offset=max_offset)

    def check_producer(
        self, producer_id: int, producer_epoch: int, first_seq: int, last_seq: int
    ) -> CheckResult:
        return self.log.producer_state.check(producer_id, producer_epoch, first_seq, last_seq)

    # -- for the driver -------------------------------------------------------------------------

    def update_high_watermark(self, high_watermark: int) -> None:
        """CommitAdvanced: the log's HW (retention bound, replication-offset-checkpoint)."""
        self.log.update_high_watermark(high_watermark)

    def election_state(self) -> ElectionState | None:
        """The persisted ElectionState, None when there is none yet. CheckpointError when the
        file is unreadable (refuse to start rather than forget a vote)."""
        path = self._quorum_state_path()
        if not self.log.storage.exists(path):
            return None
        try:
            doc = json.loads(read_whole(self.log.storage, path))
            if doc["data_version"] != _QUORUM_STATE_VERSION:
                raise ValueError(f"data_version {doc['data_version']}")
            voted, leader = int(doc["votedId"]), int(doc["leaderId"])
            return ElectionState(
                int(doc["leaderEpoch"]),
                None if voted < 0 else voted,
                None if leader < 0 else leader,
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise CheckpointError(f"{path}: unreadable quorum state ({exc})") from exc

    def persist_election_state(self, state: ElectionState) -> None:
        doc = {
            "leaderId": -1 if state.leader_id is None else state.leader_id,
            "leaderEpoch": state.epoch,
            "votedId": -1 if state.voted_id is None else state.voted_id,
            "data_version": _QUORUM_STATE_VERSION,
        }
        write_atomically(self.log.storage, self._quorum_state_path(), json.dumps(doc).encode())

    def _quorum_state_path(self) -> str:
        return f"{self.log.directory}/{QUORUM_STATE_FILE}"


def _conforms(store: RaftPartitionLog) -> tuple[RaftLogWriter, RaftPartitionView]:
    return store, store  # mypy checks RaftPartitionLog against both protocols here
