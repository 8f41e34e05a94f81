"""`RaftLogStore`: a PartitionLog as the Raft log of quorum.raft (RaftLogWriter), the one
adapter for both kinds of Raft group kraftlab runs on partition/log: the metadata quorum's
`__cluster_metadata-0` (as Kafka's KafkaMetadataLog over UnifiedLog), opened with `open`, and a
`replication.mode=raft` data partition's log, wrapped with `of_partition`. What differs is
chosen by options, not by a second class:

- the entry layout (`EntryLayout`, partition.raft.entries): RECORDS, the metadata log, one entry
  per record, consecutive entries of one epoch and kind in one RecordBatch v2; BATCHES, a data
  partition, one entry per producer batch, spanning its offsets (the bytes already carry their
  offsets and epoch, patched from the entries; the log validates CRC, offsets and epochs and
  keeps the idempotent producers' state, KIP-98, which the leader checks a produce against);
- snapshots (KIP-630), the metadata log's only: files `<20-digit end offset>-<10-digit
  epoch>.checkpoint` in the partition directory, `.part` while written or fetched, published by
  fsync + rename + fsync dir. A data partition has no state machine to snapshot, and retention
  on it needs the log start to be a boundary a lagging follower can jump to (docs/replication.md,
  Status): its snapshot methods and `delete_before` raise RaftUsageError;
- checkpoints (recovery point, log start, HW) through the store's own LogManager when it has one
  (the metadata log): after a truncation, a prefix deletion, a snapshot install and a roll, and
  on `checkpoint()`/`close()`. A data partition's log belongs to the broker's LogManager; its
  leader-epoch-checkpoint is written when the log flushes (LeaderEpochCache write_on_flush):
  Raft flushes before an append counts, and an election among many partitions then costs no
  extra fsync per partition on the driver's loop.

Both keep the epoch history in the partition's leader epoch cache, which answers
`end_offset_for_epoch`; the metadata log keeps epochs below the log start too, since its prefix
is deleted below a snapshot but not always at one, and below all of them a snapshot at the first
cached offset stands in for the log it replaced.

Invariants (quorum/raft/log.py): offsets dense in [start_offset, end_offset); epochs never
decrease; after truncate_to(n) end_offset == n; after flush() everything appended survives a
crash, and a crash loses only a tail. Truncation: in the RECORDS layout a batch cut in the middle
is re-written with its kept entries, made durable first as a `truncation-redo` record replayed on
open; in the BATCHES layout every truncation point is a batch boundary (partition.raft.entries)
and `truncate_to` refuses any other (InvariantViolation) instead of rewriting a cut batch.

Opening the metadata log: `.part` files (a fetch cut short) are removed; with a `validate`
function, the newest snapshots are checked newest first and a corrupt one (torn, flipped bits:
the envelope's checksum, quorum/raft/snapshot.py) is renamed `<name>.corrupt` when the log still
holds everything from the next older snapshot (or from offset 0) on, so nothing is lost; when it
does not, open raises `SnapshotRecoveryError` naming the file, and changes nothing. Then a
`truncation-redo` record left by a crash in the middle of `truncate_to` is replayed, and if the
newest snapshot is not backed by the log (its end offset beyond the log end, or a different
epoch at end offset - 1), the log is reset to start at the snapshot, finishing a
`complete_snapshot` a crash interrupted.

A data partition's `quorum-state` file (Kafka's FileQuorumStateStore JSON, in the partition
directory) holds its ElectionState; `persist_election_state` replaces it atomically (tmp,
fsync, rename, fsync dir): the driver calls it for PersistElectionState, before any later
effect runs.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import struct
from collections.abc import Callable, Sequence
from typing import Protocol

from partition.log import batch as rb
from partition.log.checkpoint import write_atomically
from partition.log.config import LogConfig
from partition.log.errors import CheckpointError
from partition.log.log import PartitionLog
from partition.log.manager import LogManager
from partition.log.producer_state import CheckResult
from partition.log.storage import Storage, read_whole
from partition.raft.entries import batches_to_entries, entries_to_batches, record_batches
from partition.replica.errors import InvariantViolation
from quorum.raft.effects import ElectionState
from quorum.raft.errors import RaftUsageError
from quorum.raft.log import Entry, OffsetAndEpoch, RaftLog, RaftLogWriter

__all__ = [
    "METADATA_PARTITION",
    "METADATA_TOPIC",
    "QUORUM_STATE_FILE",
    "SNAPSHOT_SUFFIX",
    "EntryLayout",
    "RaftLogStore",
    "RaftPartitionView",
    "SnapshotRecoveryError",
    "snapshot_file_name",
]

METADATA_TOPIC = "__cluster_metadata"
METADATA_PARTITION = 0
SNAPSHOT_SUFFIX = ".checkpoint"
PART_SUFFIX = ".part"
CORRUPT_SUFFIX = ".corrupt"
TAIL_CACHE_ENTRIES = 4096  # entries kept in memory behind the log end (up to twice this)
TRUNCATION_REDO = "truncation-redo"  # boundary int64, log start int64, the batch to write there
_REDO_HEAD = struct.Struct(">qq")
QUORUM_STATE_FILE = "quorum-state"
_QUORUM_STATE_VERSION = 0


class EntryLayout(enum.Enum):
    """How Raft entries lie in the log's batches (partition.raft.entries)."""

    RECORDS = "records"  # one entry per record, runs of one epoch and kind per batch (metadata)
    BATCHES = "batches"  # one entry per batch, spanning its offsets (raft data partitions)


def snapshot_file_name(snapshot: OffsetAndEpoch) -> str:
    return f"{snapshot.offset:020d}-{snapshot.epoch:010d}{SNAPSHOT_SUFFIX}"


def _parse_snapshot_name(name: str) -> OffsetAndEpoch | None:
    if not name.endswith(SNAPSHOT_SUFFIX):
        return None
    offset, dash, epoch = name[: -len(SNAPSHOT_SUFFIX)].partition("-")
    if not (dash and len(offset) == 20 and len(epoch) == 10 and offset.isdigit() and epoch.isdigit()):
        return None
    return OffsetAndEpoch(int(offset), int(epoch))


class SnapshotRecoveryError(RuntimeError):
    """The newest snapshot is corrupt and the log no longer holds what it replaced."""


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


class RaftLogStore:
    """RaftLogWriter (and, for a data partition, RaftPartitionView) over a PartitionLog. Build
    with `open` (the metadata log) or `of_partition` (a raft data partition)."""

    def __init__(self, log: PartitionLog, *, layout: EntryLayout,
                 manager: LogManager | None = None, snapshots: bool = False) -> None:  # fmt: skip
        self.manager = manager
        self.log = log
        self.layout = layout
        self.storage: Storage = log.storage
        self.directory = log.directory
        self.flush_count = 0
        self._keeps_snapshots = snapshots
        self._snapshots: list[OffsetAndEpoch] = []
        self._checkpointed_segment = -1
        self.dropped_snapshots: list[tuple[OffsetAndEpoch, str]] = []  # (snapshot, why)
        self._validate: Callable[[bytes], object] | None = None
        # RECORDS: the newest appended entries, contiguous and ending at the log end (or empty):
        # a fetch at the tail and the apply of what just committed are answered from here,
        # without a pread and a RecordBatch decode. Dropped whenever the log changes other than
        # by append.
        self._tail: list[Entry] = []

    @classmethod
    def of_partition(cls, log: PartitionLog) -> RaftLogStore:
        """A raft data partition's log (BATCHES, no snapshots, the broker's LogManager)."""
        # Every append counts toward the majority only after the driver's fsync of this log
        # (grouped per round), so the leader epoch checkpoint is written with that flush, not
        # once more per new epoch on the loop (partition/log/epoch_cache.py, write_on_flush).
        log.epoch_cache.write_on_flush()
        return cls(log, layout=EntryLayout.BATCHES)

    @classmethod
    def open(
        cls,
        storage: Storage,
        log_dir: str,
        config: LogConfig | None = None,
        validate: Callable[[bytes], object] | None = None,
    ) -> RaftLogStore:
        """Open (or create) `<log_dir>/__cluster_metadata-0` (RECORDS, snapshots, its own
        LogManager) and recover it. `validate` raises ValueError for a snapshot file that is not
        intact (see the module docstring)."""
        # preallocate: zero-filled segments, so the fsync per commit writes no inode
        # (docs/storage.md, "Preallocation").
        config = dataclasses.replace(config or LogConfig(), keep_epoch_history=True, preallocate=True)
        manager = LogManager.open(storage, log_dir, config)
        store = cls(manager.get_or_create(METADATA_TOPIC, METADATA_PARTITION),
                    layout=EntryLayout.RECORDS, manager=manager, snapshots=True)  # fmt: skip
        for name in storage.list_dir(store.directory):
            if name.endswith(PART_SUFFIX) or name.endswith(SNAPSHOT_SUFFIX + ".tmp"):
                storage.remove(f"{store.directory}/{name}")
            elif (snapshot := _parse_snapshot_name(name)) is not None:
                store._snapshots.append(snapshot)
        store._snapshots.sort()
        if storage.exists(store._redo_path()):  # a truncation cut short by a crash: finish it
            redo = read_whole(storage, store._redo_path())
            boundary, log_start = _REDO_HEAD.unpack_from(redo)
            store._apply_truncation_redo(boundary, log_start, redo[_REDO_HEAD.size :])
        store._validate = validate
        if validate is not None:
            store._drop_corrupt_snapshots(validate)
        latest = store.latest_snapshot()
        if latest is not None and not store._log_holds(latest):
            store._reset_to(latest)
        return store

    def _drop_corrupt_snapshots(self, validate: Callable[[bytes], object]) -> None:
        corrupt: list[tuple[OffsetAndEpoch, str]] = []
        for snapshot in reversed(self._snapshots):
            try:
                validate(self.read_snapshot_bytes(snapshot))
                break
            except ValueError as exc:
                corrupt.append((snapshot, str(exc)))
        if not corrupt:
            return
        kept = self._snapshots[: len(self._snapshots) - len(corrupt)]
        fallback = kept[-1].offset if kept else 0
        newest, why = corrupt[0]
        if self.start_offset > fallback or self.end_offset < newest.offset:
            raise SnapshotRecoveryError(
                f"snapshot {self._snapshot_path(newest)} is corrupt ({why}) and the log holds "
                f"[{self.start_offset}, {self.end_offset}), not everything from the next usable "
                f"state (offset {fallback}) to offset {newest.offset}: this "
                f"node cannot rebuild its metadata. Remove its metadata log directory so that it "
                f"fetches a snapshot from the leader (FetchSnapshot), or restore the file."
            )
        for snapshot, why in corrupt:
            path = self._snapshot_path(snapshot)
            self.storage.rename(path, path + CORRUPT_SUFFIX)
            self.dropped_snapshots.append((snapshot, why))
        self.storage.fsync_dir(self.directory)
        self._snapshots = kept

    # -- RaftLog (read side) -------------------------------------------------------------------

    @property
    def start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def end_offset(self) -> int:
        return self.log.log_end_offset

    def last_epoch(self) -> int:
        log = self.log
        end = log.log_end_offset
        if end > log.log_start_offset:
            cache = log.epoch_cache
            if end > cache.latest_start_offset:  # the usual answer: the latest epoch holds it
                return max(0, cache.latest)
            return max(0, cache.epoch_for_offset(end - 1))
        latest = self.latest_snapshot()
        return latest.epoch if latest is not None else 0

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        """The epoch cache keeps epochs below the log start (LogConfig.keep_epoch_history), so it
        answers exactly wherever the log has history. Below the first cached epoch only a
        snapshot exactly at the first cached offset is an answer: its epoch ends there (the log
        was reset to it). Anything else is unknown: (-1, -1)."""
        cache = self.log.epoch_cache
        found, end = cache.end_offset_for(epoch, self.log.log_end_offset)
        if found >= 0:
            return OffsetAndEpoch(end, found)
        earliest = cache.earliest()
        first_start = earliest.start_offset if earliest is not None else self.log.log_end_offset
        at_start = [s for s in self._snapshots if s.offset == first_start and s.epoch <= epoch]
        if at_start:
            return OffsetAndEpoch(first_start, at_start[-1].epoch)
        return OffsetAndEpoch(-1, -1)

    def read(self, start_offset: int, max_bytes: int) -> list[Entry]:
        log = self.log
        if not log.log_start_offset <= start_offset <= log.log_end_offset:
            raise ValueError(f"read at {start_offset} outside [{self.start_offset}, {self.end_offset}]")
        if self.layout is EntryLayout.BATCHES:
            if start_offset == log.log_end_offset:
                return []
            return batches_to_entries(log.read(start_offset, max(max_bytes, 1)))
        tail = self._tail
        if tail and tail[0].offset <= start_offset:
            return _take(tail, start_offset - tail[0].offset, max_bytes)
        return self.read_from_log(start_offset, max_bytes)

    def read_from_log(self, start_offset: int, max_bytes: int) -> list[Entry]:
        """RECORDS: `read` from the log files, never from the in-memory tail."""
        entries: list[Entry] = []
        total = 0
        offset = start_offset
        while offset < self.end_offset and (not entries or total < max_bytes):
            data = self.log.read(offset, max(max_bytes - total, 1), min_one=not entries)
            if not data:
                break
            for header in rb.iter_headers(data, check_crc=False):
                for record in rb.decode_records(data, header):
                    if record.offset < offset:
                        continue
                    value = record.value or b""
                    if entries and total + len(value) > max_bytes:
                        return entries
                    entries.append(Entry(record.offset, header.partition_leader_epoch, value, header.is_control))
                    total += len(value)
            offset = entries[-1].offset + 1 if entries else offset
        return entries

    def latest_snapshot(self) -> OffsetAndEpoch | None:
        return self._snapshots[-1] if self._snapshots else None

    def snapshot_size(self, snapshot: OffsetAndEpoch) -> int:
        self._require_snapshots(f"asked for {snapshot}")
        handle = self.storage.open(self._snapshot_path(snapshot), create=False)
        try:
            return handle.size()
        finally:
            handle.close()

    def read_snapshot(self, snapshot: OffsetAndEpoch, position: int, max_bytes: int) -> bytes:
        self._require_snapshots(f"asked for {snapshot}")
        handle = self.storage.open(self._snapshot_path(snapshot), create=False)
        try:
            return handle.read(position, max_bytes)
        finally:
            handle.close()

    # -- RaftLogWriter (write side) ------------------------------------------------------------

    def append(self, entries: Sequence[Entry]) -> None:
        if not entries:
            return
        log = self.log
        expected = log.log_end_offset
        epoch = self.last_epoch() if expected > log.log_start_offset else -1
        for entry in entries:
            if entry.offset != expected or entry.epoch < epoch:
                raise ValueError(f"entry {entry.offset}@{entry.epoch} does not continue the log "
                                 f"(end offset {expected}, last epoch {epoch})")  # fmt: skip
            expected, epoch = entry.next_offset, entry.epoch
        if self.layout is EntryLayout.BATCHES:
            log.append_as_follower(entries_to_batches(entries))
            return
        tail = self._tail
        continues = bool(tail) and tail[-1].offset + 1 == entries[0].offset
        batches = record_batches(entries)
        if len(batches) == 1:  # the usual append: one batch, encoded here, not parsed again
            log.append_encoded(batches[0], rb.read_header(batches[0]))
        else:
            log.append_as_follower(b"".join(batches), check_crc=False)
        if not continues:
            tail.clear()
        tail.extend(entries)
        if len(tail) > 2 * TAIL_CACHE_ENTRIES:
            del tail[: len(tail) - TAIL_CACHE_ENTRIES]

    def flush(self) -> None:
        self.flush_count += 1
        self.log.flush()
        if self.manager is not None and self.log.segments[-1].base_offset != self._checkpointed_segment:
            self.checkpoint()  # a roll happened: move the recovery point on disk too

    def truncate_to(self, end_offset: int) -> None:
        if end_offset >= self.end_offset:
            return
        if self.layout is EntryLayout.BATCHES:
            header = rb.read_header(self.log.read(end_offset, 1))
            if header.base_offset != end_offset:
                # A cut inside a batch would drop offsets below end_offset, possibly committed.
                raise InvariantViolation(
                    f"truncation to {end_offset} inside the batch at {header.base_offset}"
                )
            self.log.truncate_to(end_offset)  # flushed, and producer state rebuilt, by the log
            return
        self._tail.clear()
        if end_offset < self.start_offset:
            raise ValueError(f"truncate to {end_offset} below the log start {self.start_offset}")
        # The log truncates whole batches; when end_offset falls inside one (common: a follower's
        # epoch runs past where the leader's ended), the entries of that batch below end_offset
        # are written back. So that a crash between the cut and the rewrite cannot lose them,
        # the rewrite is first made durable as a redo record (TRUNCATION_REDO), replayed on open.
        data = self.log.read(end_offset, 1)
        header = rb.read_header(data)
        kept = [
            Entry(r.offset, header.partition_leader_epoch, r.value or b"", header.is_control)
            for r in rb.decode_records(data, header)
            if r.offset < end_offset
        ]
        if not kept:
            self.log.truncate_to(end_offset)
        else:
            batch = b"".join(record_batches(kept))
            head = _REDO_HEAD.pack(header.base_offset, self.log.log_start_offset)
            write_atomically(self.storage, self._redo_path(), head + batch)
            self._apply_truncation_redo(header.base_offset, self.log.log_start_offset, batch)
        # (the log's on_truncated hook, or the redo, has written the log dir's checkpoints)

    def _apply_truncation_redo(self, boundary: int, log_start: int, batch: bytes) -> None:
        """Cut the log at `boundary` (a batch start) and append `batch` there, durably, with the
        log start put back to `log_start` (it may lie inside that batch); then drop the redo
        record. Idempotent, so it runs again after a crash at any point."""
        self._tail.clear()
        if self.log.log_end_offset >= boundary:
            if self.log.log_end_offset > boundary:
                self.log.truncate_to(max(boundary, self.log.log_start_offset))
            self.log.append_as_follower(batch, check_crc=False)
            self.log.log_start_offset = max(min(log_start, self.log.log_end_offset), self.log.log_start_offset)
            self.log.flush()
            self.checkpoint()
        self.storage.remove(self._redo_path())
        self.storage.fsync_dir(self.directory)

    def _redo_path(self) -> str:
        return f"{self.directory}/{TRUNCATION_REDO}"

    def write_snapshot(self, snapshot: OffsetAndEpoch, data: bytes) -> None:
        self._require_snapshots(f"asked to write {snapshot}")
        path = self._snapshot_path(snapshot)
        write_atomically(self.storage, path, data)
        self._add_snapshot(snapshot)

    def write_snapshot_chunk(self, snapshot: OffsetAndEpoch, position: int, data: bytes) -> None:
        self._require_snapshots(f"asked to write {snapshot}")
        handle = self.storage.open(self._snapshot_path(snapshot) + PART_SUFFIX)
        try:
            if position == 0:
                handle.truncate(0)  # a fetch that restarts from scratch
            if handle.size() != position:
                raise ValueError(f"snapshot chunk at {position}, but {handle.size()} bytes written")
            handle.append(data)
        finally:
            handle.close()

    def complete_snapshot(self, snapshot: OffsetAndEpoch) -> None:
        """With a `validate` function (open), a fetched snapshot that is not intact is removed
        and refused (ValueError) before anything of the log changes: the node stops, and on
        restart fetches it again from an intact log."""
        self._require_snapshots(f"asked to install {snapshot}")
        part = self._snapshot_path(snapshot) + PART_SUFFIX
        if self._validate is not None:
            try:
                self._validate(read_whole(self.storage, part))
            except ValueError:
                self.storage.remove(part)
                raise
        handle = self.storage.open(part, create=False)
        try:
            handle.fsync()
        finally:
            handle.close()
        self.storage.rename(part, self._snapshot_path(snapshot))
        self.storage.fsync_dir(self.directory)
        self._add_snapshot(snapshot)
        if not self._log_holds(snapshot):
            self._reset_to(snapshot)

    def delete_before(self, offset: int) -> None:
        self._require_snapshots(f"no prefix is deleted without one; asked for {offset}")
        latest = self.latest_snapshot()
        limit = min(offset, latest.offset if latest is not None else self.start_offset, self.end_offset)
        if limit <= self.start_offset:
            return
        self._tail.clear()
        self.log.delete_prefix(limit, check_high_watermark=False)
        self.log.flush()  # the log start checkpoint must never name offsets the disk lacks
        keep = [s for s in self._snapshots if s.offset <= self.start_offset][-1:]
        stale = [s for s in self._snapshots if s.offset < self.start_offset and s not in keep]
        for snapshot in stale:
            self.storage.remove(self._snapshot_path(snapshot))
            self._snapshots.remove(snapshot)
        if stale:
            self.storage.fsync_dir(self.directory)  # a deleted snapshot must not come back
        self.checkpoint()

    # -- housekeeping --------------------------------------------------------------------------

    def checkpoint(self) -> None:
        """Write the log dir's checkpoint files (recovery point, log start, HW)."""
        self._own_manager().checkpoint()
        self._checkpointed_segment = self.log.segments[-1].base_offset

    def close(self) -> None:
        self._own_manager().close()

    def read_snapshot_bytes(self, snapshot: OffsetAndEpoch) -> bytes:
        return read_whole(self.storage, self._snapshot_path(snapshot))

    def _require_snapshots(self, what: str) -> None:
        if not self._keeps_snapshots:
            raise RaftUsageError(f"this log keeps no snapshots (a raft data partition): {what}")

    def _own_manager(self) -> LogManager:
        if self.manager is None:
            raise RaftUsageError("a raft data partition's log belongs to the broker's LogManager")
        return self.manager

    def _snapshot_path(self, snapshot: OffsetAndEpoch) -> str:
        return f"{self.directory}/{snapshot_file_name(snapshot)}"

    def _add_snapshot(self, snapshot: OffsetAndEpoch) -> None:
        if snapshot not in self._snapshots:
            self._snapshots.append(snapshot)
            self._snapshots.sort()

    def _log_holds(self, snapshot: OffsetAndEpoch) -> bool:
        """Whether the log holds entry snapshot.offset - 1 with epoch snapshot.epoch (or the log
        already starts at or after the snapshot's end, its prefix having been deleted)."""
        if snapshot.offset <= self.start_offset:
            return snapshot.offset <= self.end_offset
        if snapshot.offset > self.end_offset:
            return False
        return self.log.epoch_cache.epoch_for_offset(snapshot.offset - 1) == snapshot.epoch

    def _reset_to(self, snapshot: OffsetAndEpoch) -> None:
        self._tail.clear()
        self.log.truncate_fully(snapshot.offset)
        self.checkpoint()


    # -- RaftPartitionView, and a data partition's driver ---------------------------------------

    def read_batches(self, offset: int, max_bytes: int, max_offset: int) -> bytes:
        return self.log.read(offset, max_bytes, max_offset=max_offset)

    def check_producer(
        self, producer_id: int, producer_epoch: int, first_seq: int, last_seq: int
    ) -> CheckResult:
        return self.log.producer_state.check(producer_id, producer_epoch, first_seq, last_seq)

    def update_high_watermark(self, high_watermark: int) -> None:
        """CommitAdvanced: the log's HW (retention bound, replication-offset-checkpoint)."""
        self.log.update_high_watermark(high_watermark)

    def election_state(self) -> ElectionState | None:
        """The persisted ElectionState of a data partition, None when there is none yet.
        CheckpointError when the file is unreadable (refuse to start rather than forget a
        vote)."""
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


def _take(tail: list[Entry], index: int, max_bytes: int) -> list[Entry]:
    """Entries of `tail` from `index` as the log read returns them: the first one whatever its
    size, then while the values fit in max_bytes."""
    out: list[Entry] = []
    total = 0
    for entry in tail[index:] if index else tail:
        size = len(entry.data)
        if out and total + size > max_bytes:
            break
        out.append(entry)
        total += size
    return out


def _conforms(store: RaftLogStore) -> tuple[RaftLogWriter, RaftPartitionView]:
    return store, store  # mypy checks RaftLogStore against both protocols here
