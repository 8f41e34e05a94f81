"""A small in-memory RaftLogWriter for core tests: dense entries, an epoch view computed from
them, flushed-prefix tracking (`crash()` drops what was not fsynced, tail only), and snapshots.
Checks the RaftLog contract loudly so a core that misuses the log fails its tests."""

from __future__ import annotations

from collections.abc import Sequence

from quorum.raft.log import Entry, OffsetAndEpoch


class MemLog:
    def __init__(self) -> None:
        self.entries: list[Entry] = []
        self._start = 0
        self.flushed_end = 0
        self.snapshots: dict[OffsetAndEpoch, bytes] = {}
        self.parts: dict[OffsetAndEpoch, bytearray] = {}
        self.flush_count = 0
        self._snapshot: OffsetAndEpoch | None = None

    # ------------------------------------------------------------------------- RaftLog

    @property
    def start_offset(self) -> int:
        return self._start

    @property
    def end_offset(self) -> int:
        return self._start + len(self.entries)

    def last_epoch(self) -> int:
        if self.entries:
            return self.entries[-1].epoch
        return self._snapshot.epoch if self._snapshot else 0

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        best: OffsetAndEpoch | None = None
        if self._snapshot is not None and self._snapshot.epoch <= epoch:
            best = OffsetAndEpoch(self._start, self._snapshot.epoch)
        if self.entries and self.entries[-1].epoch <= epoch:
            return OffsetAndEpoch(self.end_offset, self.entries[-1].epoch)
        for e in self.entries:
            if e.epoch <= epoch:
                best = OffsetAndEpoch(e.offset + 1, e.epoch)
            else:
                break
        return best if best is not None else OffsetAndEpoch(-1, -1)

    def read(self, start_offset: int, max_bytes: int) -> list[Entry]:
        if not self._start <= start_offset <= self.end_offset:
            raise ValueError(f"read at {start_offset} outside [{self._start}, {self.end_offset}]")
        out: list[Entry] = []
        size = 0
        for e in self.entries[start_offset - self._start :]:
            if out and size + len(e.data) > max_bytes:
                break
            out.append(e)
            size += len(e.data)
        return out

    def latest_snapshot(self) -> OffsetAndEpoch | None:
        return self._snapshot

    def snapshot_size(self, snapshot: OffsetAndEpoch) -> int:
        return len(self.snapshots[snapshot])

    def read_snapshot(self, snapshot: OffsetAndEpoch, position: int, max_bytes: int) -> bytes:
        return self.snapshots[snapshot][position : position + max_bytes]

    # ------------------------------------------------------------------- RaftLogWriter

    def append(self, entries: Sequence[Entry]) -> None:
        for e in entries:
            if e.offset != self.end_offset:
                raise AssertionError(f"append at {e.offset}, log end is {self.end_offset}")
            if e.epoch < self.last_epoch():
                raise AssertionError(f"epoch {e.epoch} after {self.last_epoch()}")
            self.entries.append(e)

    def flush(self) -> None:
        self.flush_count += 1
        self.flushed_end = self.end_offset

    def truncate_to(self, end_offset: int) -> None:
        if end_offset < self._start:
            raise AssertionError(f"truncate to {end_offset} below log start {self._start}")
        del self.entries[end_offset - self._start :]
        self.flushed_end = min(self.flushed_end, end_offset)

    def write_snapshot(self, snapshot: OffsetAndEpoch, data: bytes) -> None:
        self.snapshots[snapshot] = bytes(data)
        if self._snapshot is None or snapshot > self._snapshot:
            self._snapshot = snapshot

    def write_snapshot_chunk(self, snapshot: OffsetAndEpoch, position: int, data: bytes) -> None:
        part = self.parts.setdefault(snapshot, bytearray())
        if position != len(part):
            raise AssertionError(f"chunk at {position}, have {len(part)} bytes")
        part.extend(data)

    def complete_snapshot(self, snapshot: OffsetAndEpoch) -> None:
        self.write_snapshot(snapshot, bytes(self.parts.pop(snapshot)))
        idx = snapshot.offset - 1 - self._start
        holds = 0 <= idx < len(self.entries) and self.entries[idx].epoch == snapshot.epoch
        if not holds:
            self.entries = []
            self._start = snapshot.offset
            self.flushed_end = snapshot.offset

    def delete_before(self, offset: int) -> None:
        if self._snapshot is None or offset > self._snapshot.offset:
            raise AssertionError(f"delete_before({offset}) past the newest snapshot")
        if offset <= self._start:
            return
        del self.entries[: offset - self._start]
        self._start = offset

    # ------------------------------------------------------------------------- testing

    def crash(self) -> None:
        """Lose everything appended but not flushed (from the tail only)."""
        keep = max(0, self.flushed_end - self._start)
        del self.entries[keep:]
