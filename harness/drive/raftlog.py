"""`RaftLogStore`: the Raft metadata log (quorum.raft.log.RaftLogWriter) on partition/log, as
Kafka keeps `__cluster_metadata-0` in an ordinary partition log (KafkaMetadataLog over UnifiedLog).

Mapping:
- consecutive entries with the same epoch and control flag become one RecordBatch v2 with
  base offset = the first entry's offset, partitionLeaderEpoch = the epoch, the control
  attribute bit for control entries, one record per entry whose value is `Entry.data`;
- the partition's leader epoch cache answers `end_offset_for_epoch`, keeping epochs below the
  log start, since the prefix is deleted below a snapshot but not always at one; below all of
  them a snapshot at the first cached offset stands in for the log it replaced (KIP-630);
- snapshots are files `<20-digit end offset>-<10-digit epoch>.checkpoint` in the partition
  directory, `.part` while being written or fetched, published by fsync + rename + fsync dir;
- checkpoints (recovery point, log start, HW) go through LogManager: after a truncation, a prefix
  deletion, a snapshot install and a roll, and on `checkpoint()`/`close()`.

Invariants (quorum/raft/log.py): offsets dense in [start_offset, end_offset); epochs never
decrease; after truncate_to(n) end_offset == n (a batch cut in the middle is re-written with its
kept entries); after flush() everything appended survives a crash, and a crash loses only a tail.

On open, `.part` files (a fetch cut short) are removed; with a `validate` function, the newest
snapshots are checked newest first and a corrupt one (torn, flipped bits: the envelope's checksum,
quorum/raft/snapshot.py) is renamed `<name>.corrupt` when the log still holds everything from the
next older snapshot (or from offset 0) on, so nothing is lost; when it does not, open raises
`SnapshotRecoveryError` naming the file, and changes nothing. Then a `truncation-redo` record left by a crash
in the middle of `truncate_to` is replayed, and if the newest snapshot is not backed by the log
(its end offset beyond the log end, or a different epoch at end offset - 1), the log is reset to
start at the snapshot, finishing a `complete_snapshot` a crash interrupted.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Callable, Sequence

from partition.log import batch as rb
from partition.log.checkpoint import write_atomically
from partition.log.config import LogConfig
from partition.log.log import PartitionLog
from partition.log.manager import LogManager
from partition.log.storage import Storage, read_whole
from quorum.raft.log import Entry, OffsetAndEpoch, RaftLogWriter

METADATA_TOPIC = "__cluster_metadata"
METADATA_PARTITION = 0
SNAPSHOT_SUFFIX = ".checkpoint"
PART_SUFFIX = ".part"
CORRUPT_SUFFIX = ".corrupt"
MAX_BATCH_DATA_BYTES = 512 * 1024
TAIL_CACHE_ENTRIES = 4096  # entries kept in memory behind the log end (up to twice this)
TRUNCATION_REDO = "truncation-redo"  # boundary int64, log start int64, the batch to write there
_REDO_HEAD = struct.Struct(">qq")


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


class RaftLogStore:
    """quorum.raft.log.RaftLogWriter over a PartitionLog. Build with `RaftLogStore.open`."""

    def __init__(self, manager: LogManager, log: PartitionLog) -> None:
        self.manager = manager
        self.log = log
        self.storage: Storage = log.storage
        self.directory = log.directory
        self._snapshots: list[OffsetAndEpoch] = []
        self._checkpointed_segment = -1
        self.dropped_snapshots: list[tuple[OffsetAndEpoch, str]] = []  # (snapshot, why)
        self._validate: Callable[[bytes], object] | None = None
        # The newest appended entries, contiguous and ending at the log end (or empty): a fetch
        # at the tail and the apply of what just committed are answered from here, without a
        # pread and a RecordBatch decode. Dropped whenever the log changes other than by append.
        self._tail: list[Entry] = []

    @classmethod
    def open(
        cls,
        storage: Storage,
        log_dir: str,
        config: LogConfig | None = None,
        validate: Callable[[bytes], object] | None = None,
    ) -> RaftLogStore:
        """Open (or create) `<log_dir>/__cluster_metadata-0` and recover it. `validate` raises
        ValueError for a snapshot file that is not intact (see the module docstring)."""
        # preallocate: zero-filled segments, so the fsync per commit writes no inode
        # (docs/storage.md, "Preallocation").
        config = dataclasses.replace(config or LogConfig(), keep_epoch_history=True, preallocate=True)
        manager = LogManager.open(storage, log_dir, config)
        store = cls(manager, manager.get_or_create(METADATA_TOPIC, METADATA_PARTITION))
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
                return cache.latest
            return cache.epoch_for_offset(end - 1)
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
        tail = self._tail
        if tail and tail[0].offset <= start_offset:
            return _take(tail, start_offset - tail[0].offset, max_bytes)
        return self.read_from_log(start_offset, max_bytes)

    def read_from_log(self, start_offset: int, max_bytes: int) -> list[Entry]:
        """`read` from the log files, never from the in-memory tail."""
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
        handle = self.storage.open(self._snapshot_path(snapshot), create=False)
        try:
            return handle.size()
        finally:
            handle.close()

    def read_snapshot(self, snapshot: OffsetAndEpoch, position: int, max_bytes: int) -> bytes:
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
            expected, epoch = expected + 1, entry.epoch
        tail = self._tail
        continues = bool(tail) and tail[-1].offset + 1 == entries[0].offset
        batches = self._encode(entries)
        if len(batches) == 1:  # the usual append: one batch, encoded here, not parsed again
            log.append_encoded(batches[0], rb.read_header(batches[0]))
        else:
            log.append_as_follower(b"".join(batches), check_crc=False)
        if not continues:
            tail.clear()
        tail.extend(entries)
        if len(tail) > 2 * TAIL_CACHE_ENTRIES:
            del tail[: len(tail) - TAIL_CACHE_ENTRIES]

    @staticmethod
    def _encode(entries: Sequence[Entry]) -> list[bytes]:
        """One RecordBatch per run of entries with the same epoch and kind, up to
        MAX_BATCH_DATA_BYTES of data each; the values-only encoder, no Record per entry."""
        first = entries[0]
        epoch, control = first.epoch, first.control
        datas = [e.data for e in entries]
        # append() has checked that epochs never decrease: equal ends mean one epoch throughout.
        if entries[-1].epoch == epoch and sum(map(len, datas)) <= MAX_BATCH_DATA_BYTES and all(
            e.control == control for e in entries
        ):
            # The usual append: one proposal batch or one Fetch's records.
            return [rb.encode_values_batch(datas, base_offset=first.offset,
                                           partition_leader_epoch=epoch, is_control=control)]  # fmt: skip
        batches: list[bytes] = []
        group: list[Entry] = []
        size = 0
        for entry in [*entries, None]:
            if group and (entry is None or entry.epoch != group[0].epoch or entry.control != group[0].control
                          or size + len(entry.data) > MAX_BATCH_DATA_BYTES):  # fmt: skip
                batches.append(rb.encode_values_batch(
                    [e.data for e in group], base_offset=group[0].offset,
                    partition_leader_epoch=group[0].epoch, is_control=group[0].control))  # fmt: skip
                group, size = [], 0
            if entry is not None:
                group.append(entry)
                size += len(entry.data)
        return batches

    def flush(self) -> None:
        self.log.flush()
        if self.log.segments[-1].base_offset != self._checkpointed_segment:
            self.checkpoint()  # a roll happened: move the recovery point on disk too

    def truncate_to(self, end_offset: int) -> None:
        if end_offset >= self.end_offset:
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
            batch = b"".join(self._encode(kept))
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
        path = self._snapshot_path(snapshot)
        write_atomically(self.storage, path, data)
        self._add_snapshot(snapshot)

    def write_snapshot_chunk(self, snapshot: OffsetAndEpoch, position: int, data: bytes) -> None:
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
        self.manager.checkpoint()
        self._checkpointed_segment = self.log.segments[-1].base_offset

    def close(self) -> None:
        self.manager.close()

    def read_snapshot_bytes(self, snapshot: OffsetAndEpoch) -> bytes:
        return read_whole(self.storage, self._snapshot_path(snapshot))

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


def _conforms(store: RaftLogStore) -> RaftLogWriter:
    return store  # mypy checks RaftLogStore against the contract here
