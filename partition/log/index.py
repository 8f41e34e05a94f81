"""Sparse per-segment indexes in Kafka's file formats (storage/.../OffsetIndex.java, TimeIndex.java).

- `.index`: 8-byte entries, relative offset int32 + physical position int32, big-endian. An entry
  is added for a batch when more than `index.interval.bytes` were appended since the previous one;
  it maps the batch's *last* offset to the batch's start position (as Kafka does), so a lookup of
  offset t takes the floor entry and scans forward at most ~interval bytes of batch headers.
- `.timeindex`: 12-byte entries, timestamp int64 + relative offset int32, written at the same
  points when the segment's max timestamp grew, and once more when the segment is rolled, so the
  last entry of a closed segment holds its max timestamp (used by retention.ms).

Entries live in memory (two Python lists, searched with bisect) and reach the file in `flush()`,
written through one handle kept open while the index changes (no fsync). Durability (docs/storage.md,
"Index durability"): an index is fsynced by `fsync()` when its segment is sealed (a roll) and on
close, not on every flush of the active segment; what a crash can do to an index file is then
lose entries appended since its last fsync, or tear the last one. It never brings back entries
that were removed: `truncate_entries` and `reset` (a truncation, a rebuild on recovery) fsync the
cut at once, so every entry in the file was right for the bytes of the segment when written, and
recovery trusts only entries below the recovery point (whose batches were fsynced). `load`
refuses an index that is not sane (size not a multiple of the entry size, keys or values not
strictly increasing, positions past the segment) so the caller rebuilds it.
"""

from __future__ import annotations

import bisect
import struct

from partition.log.storage import Storage, StorageFile

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")


class _SparseIndex:
    """Two parallel lists (keys, values), strictly increasing, persisted as fixed-size entries."""

    _entry: struct.Struct

    def __init__(self, storage: Storage, path: str) -> None:
        self._storage = storage
        self.path = path
        self.keys: list[int] = []
        self.values: list[int] = []
        self._written = 0  # entries already in the file
        self._unsynced = False  # the file changed since its last fsync
        self._handle: StorageFile | None = None  # open while the index is written to

    def load(self, value_limit: int) -> bool:
        """Read the file; False (and empty) when missing or not sane."""
        self.keys, self.values, self._written = [], [], 0
        if not self._storage.exists(self.path):
            return False
        handle = self._storage.open(self.path, create=False)
        try:
            data = handle.read(0, handle.size())
        finally:
            handle.close()
        size = self._entry.size
        if len(data) % size:
            return False
        pairs = [self._entry.unpack_from(data, i) for i in range(0, len(data), size)]
        keys = [int(p[0]) for p in pairs]
        values = [int(p[1]) for p in pairs]
        for i in range(1, len(keys)):
            if keys[i] <= keys[i - 1] or values[i] < values[i - 1]:
                return False
        if values and (values[0] < 0 or values[-1] > value_limit):
            return False
        self.keys, self.values, self._written = keys, values, len(keys)
        return True

    def append(self, key: int, value: int) -> None:
        self.keys.append(key)
        self.values.append(value)

    def _file(self) -> StorageFile:
        if self._handle is None:
            self._handle = self._storage.open(self.path)
        return self._handle

    def flush(self) -> None:
        """Write entries added since the last flush, with no fsync: the active segment's index
        is not made durable with each flush of the log (module docstring)."""
        if self._written == len(self.keys):
            return
        fresh = b"".join(
            self._entry.pack(k, v)
            for k, v in zip(self.keys[self._written :], self.values[self._written :], strict=True)
        )
        handle = self._file()
        end = self._written * self._entry.size
        if handle.size() != end:  # a torn entry left by a crash, not loaded: never keep it
            handle.truncate(end)
        handle.append(fresh)
        self._written = len(self.keys)
        self._unsynced = True

    def fsync(self) -> None:
        """Flush, then fsync only if the file changed (a sealed segment's index, a clean close)."""
        self.flush()
        if self._unsynced:
            self._file().fsync()
            self._unsynced = False

    def release(self) -> None:
        """Close the handle (the segment is sealed or closed); the next write opens it again."""
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    def truncate_entries(self, count: int) -> None:
        """Keep the first `count` entries, in memory and, durably at once, in the file: a crash
        must never bring back an entry that no longer describes the segment while entries
        written after the cut survive (rare: a truncation, recovery on open)."""
        if count >= len(self.keys):
            return
        del self.keys[count:]
        del self.values[count:]
        if self._written > count:
            handle = self._file()
            handle.truncate(count * self._entry.size)
            handle.fsync()
            self._written = count
            self._unsynced = False

    def reset(self) -> None:
        """Drop every entry; the file is left empty (created if missing: "rebuilt, nothing yet"),
        the cut fsynced as in `truncate_entries`."""
        del self.keys[:], self.values[:]
        handle = self._file()
        if handle.size():
            handle.truncate(0)
            handle.fsync()
        self._written = 0
        self._unsynced = False


class OffsetIndex(_SparseIndex):
    """Relative last offset of a batch -> start position of that batch."""

    _entry = _OFFSET_ENTRY

    def lookup(self, relative_offset: int) -> int:
        """Start position of the batch of the floor entry (<= relative_offset), or 0."""
        i = bisect.bisect_right(self.keys, relative_offset)
        return self.values[i - 1] if i else 0

    def truncate_from_position(self, position: int) -> None:
        """Drop entries pointing at or past `position`."""
        self.truncate_entries(bisect.bisect_left(self.values, position))


class TimeIndex(_SparseIndex):
    """Max timestamp so far -> relative offset of the batch where it was reached."""

    _entry = _TIME_ENTRY

    def max_timestamp(self) -> int | None:
        return self.keys[-1] if self.keys else None

    def maybe_append(self, timestamp_ms: int, relative_offset: int) -> None:
        if (not self.keys or timestamp_ms > self.keys[-1]) and (
            not self.values or relative_offset > self.values[-1]
        ):
            self.append(timestamp_ms, relative_offset)
