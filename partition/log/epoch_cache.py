"""The leader epoch cache (KIP-101, KIP-279): which leader epoch started at which offset.

It answers OffsetsForLeaderEpoch and the Fetch diverging-epoch check: `end_offset_for(e)` is the
largest known epoch E <= e with the offset where E ended (the start offset of the next epoch, or
the log end offset when E is the latest), or (-1, -1) when no epoch <= e is known. Kafka returns
(e, first start offset) for an epoch below the first one; we return (-1, -1) there, as the Raft
contract (quorum/raft/log.py) asks; the follower then truncates to its log start.

Invariants (checked by `assign`): epochs strictly increase along the entries and so do start
offsets. Every change is persisted at once to `leader-epoch-checkpoint` (atomic replace), so after a
crash the file may name epochs beyond the recovered log end; the log trims them on recovery
(`truncate_from_end(log_end_offset)`), as Kafka does.

`write_on_flush()` (a replication.mode=raft log, partition.raft.log) trades the write per change
for one when the log flushes (`persist_if_changed`, PartitionLog.flush): a Raft driver fsyncs
the log before anything depends on an append (a fetch acknowledging it), grouped per event-loop
round for every partition of a broker, and an election among many partitions would otherwise
be two fsyncs per partition on the loop. Still safe: the log's recovery point moves only in
`flush`, after the checkpoint is durable, so every entry below it is in the file; entries above
it are found again by the recovery scan (`assign` per batch from the recovery point on).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from partition.log.checkpoint import read_epochs, write_epochs
from partition.log.storage import Storage

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


@dataclass(frozen=True, slots=True, order=True)
class EpochEntry:
    epoch: int
    start_offset: int


class LeaderEpochCache:
    """Epoch -> start offset, persisted to `path` through `storage` (None: in memory only)."""

    def __init__(self, storage: Storage | None, path: str | None) -> None:
        self._storage = storage
        self._path = path
        self._on_flush = False  # write_on_flush(): changes written by persist_if_changed
        self._changed = False
        self._entries: list[EpochEntry] = []
        if storage is not None and path is not None:
            self._entries = [EpochEntry(e, o) for e, o in read_epochs(storage, path)]
        # The latest epoch (-1 when empty) and its start as plain attributes, for the append
        # path; every change of the entries goes through `_persist`, which keeps them in step.
        self.latest: int
        self.latest_start_offset: int
        self._set_latest()

    @property
    def entries(self) -> tuple[EpochEntry, ...]:
        return tuple(self._entries)

    def latest_epoch(self) -> int:
        return self.latest

    def earliest(self) -> EpochEntry | None:
        return self._entries[0] if self._entries else None

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch of the entry at `offset` (largest start <= offset), or -1."""
        entries = self._entries
        if entries and offset >= entries[-1].start_offset:
            return entries[-1].epoch  # the usual question: the log's end is in the latest epoch
        i = bisect.bisect_right([e.start_offset for e in self._entries], offset)
        return self._entries[i - 1].epoch if i else UNDEFINED_EPOCH

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that `epoch` starts at `start_offset` (the first batch of an epoch). A repeat of
        the latest epoch at a later offset is a no-op. Entries with an epoch >= `epoch` or a start
        offset >= `start_offset` are dropped first (a log that was truncated and rewritten).
        Returns True when the cache changed (and was persisted)."""
        if epoch < 0:
            return False
        latest = self._entries[-1] if self._entries else None
        if latest is not None and latest.epoch == epoch and latest.start_offset <= start_offset:
            return False
        self._entries = [
            e for e in self._entries if e.epoch < epoch and e.start_offset < start_offset
        ]
        self._entries.append(EpochEntry(epoch, start_offset))
        self._persist()
        return True

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(largest known epoch <= `epoch`, its end offset) or (-1, -1). See the module docstring."""
        if epoch < 0 or not self._entries:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        i = bisect.bisect_right([e.epoch for e in self._entries], epoch)
        if i == 0:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        found = self._entries[i - 1]
        end = self._entries[i].start_offset if i < len(self._entries) else log_end_offset
        return found.epoch, end

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop entries starting at or after `end_offset` (the log was truncated there)."""
        kept = [e for e in self._entries if e.start_offset < end_offset]
        if len(kept) != len(self._entries):
            self._entries = kept
            self._persist()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at `start_offset`: drop epochs that ended before it and move the
        start of the epoch containing it up to it (Kafka LeaderEpochFileCache.truncateFromStart)."""
        before = [e for e in self._entries if e.start_offset <= start_offset]
        after = [e for e in self._entries if e.start_offset > start_offset]
        kept = ([EpochEntry(before[-1].epoch, start_offset)] if before else []) + after
        if kept != self._entries:
            self._entries = kept
            self._persist()

    def fill_prefix(self, pairs: list[tuple[int, int]]) -> None:
        """Add (epoch, start_offset) entries found by scanning batches below the earliest entry
        (a log start that went back after a crash: the prefix deletion was not yet durable, but the
        checkpoint already forgot those epochs)."""
        first = self._entries[0] if self._entries else None
        merged: list[EpochEntry] = []
        for epoch, start in pairs:
            if first is not None and (start >= first.start_offset or epoch > first.epoch):
                break
            if not merged or epoch > merged[-1].epoch:
                merged.append(EpochEntry(epoch, start))
        if not merged:
            return
        rest = self._entries
        if rest and rest[0].epoch == merged[-1].epoch:
            rest = rest[1:]
        self._entries = merged + rest
        self._persist()

    def clear(self) -> None:
        if self._entries:
            self._entries = []
            self._persist()

    def write_on_flush(self) -> None:
        """From now on, write changes when the log flushes, not at once (module docstring)."""
        self._on_flush = True

    def persist_if_changed(self) -> None:
        """Write the checkpoint if a change since the last write is not in it (write_on_flush)."""
        if self._changed:
            self._changed = False
            self._write()

    def _set_latest(self) -> None:
        """`latest` (the newest epoch, or -1) and `latest_start_offset` (where it starts, or
        -1): read on every metadata log append and Raft input, kept here for them."""
        last = self._entries[-1] if self._entries else None
        self.latest = UNDEFINED_EPOCH if last is None else last.epoch
        self.latest_start_offset = -1 if last is None else last.start_offset

    def _persist(self) -> None:
        self._set_latest()
        if self._on_flush:
            self._changed = True
        else:
            self._write()

    def _write(self) -> None:
        if self._storage is not None and self._path is not None:
            write_epochs(self._storage, self._path, ((e.epoch, e.start_offset) for e in self._entries))
