"""One log segment: `<20-digit base offset>.log` plus its `.index` and `.timeindex`
(Kafka's LogSegment). The segment stores whole RecordBatch v2 batches back to back and never
decodes records.

Invariants:
- batches in the file are valid (CRC, magic, sizes) and their offsets strictly increase from
  `base_offset`; anything that breaks that is cut off by `recover` (torn tail, bad CRC, offset
  going backwards) and never served;
- the offset index maps batch last offsets (relative) to batch start positions, one entry per
  `index_interval_bytes`; the time index's last entry is the max timestamp at that point;
  a sealed segment's indexes are durable (fsynced by the roll's flush), the active segment's
  only written on flush (index.py), so `trust_prefix` checks and completes what a crash left;
- `size` is the file size; `next_offset` the offset after the last batch (base_offset if empty).
  With `zero_fill` (storage.py) the file may be longer on disk: zeros written ahead of the end,
  cut off by `seal` and `close`; after a crash, recovery cuts them as it cuts a torn tail, but
  does not count them as lost bytes (they were never appended).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator

from partition.log import batch as rb
from partition.log.errors import CorruptRecordError, InvalidRecordError
from partition.log.index import OffsetIndex, TimeIndex
from partition.log.storage import Buffer, Storage, StorageFile

RECOVERY_CHUNK_BYTES = 1 << 20
_INT32_MAX = (1 << 31) - 1
NO_TIMESTAMP = -1
_LOG_OVERHEAD = rb.LOG_OVERHEAD


def segment_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


class LogSegment:
    """A segment file and its indexes. Open with `open` (sanity-checks or rebuilds the indexes)."""

    def __init__(self, storage: Storage, directory: str, base_offset: int, index_interval_bytes: int,
                 zero_fill: bool = False) -> None:  # fmt: skip
        self.storage = storage
        self.directory = directory
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.log_path = f"{directory}/{segment_name(base_offset, '.log')}"
        self.offset_index = OffsetIndex(storage, f"{directory}/{segment_name(base_offset, '.index')}")
        self.time_index = TimeIndex(storage, f"{directory}/{segment_name(base_offset, '.timeindex')}")
        # Appended to for as long as the segment is active: blocks may be reserved ahead of its
        # end (storage.py, preallocate), or zeros written there (zero_fill: LogConfig.preallocate),
        # and `seal` gives back what was not used.
        self.file: StorageFile = storage.open(self.log_path, preallocate=True, zero_fill=zero_fill)
        self.size = self.file.size()
        self.next_offset = base_offset
        self.max_timestamp_ms = NO_TIMESTAMP
        self.first_batch_max_timestamp_ms = NO_TIMESTAMP  # segment.ms is measured from this (Kafka)
        self._bytes_since_index = 0
        self._max_ts_relative_offset = 0

    # -- opening -------------------------------------------------------------------------------

    def load_closed(self, next_offset: int) -> bool:
        """Open a segment known to be complete (below the recovery point) without reading the
        log file: indexes are loaded and sanity-checked. False if they must be rebuilt."""
        self.next_offset = next_offset
        if not (self.offset_index.load(self.size) and self.time_index.load(next_offset - self.base_offset)):
            return False
        if self.size and not self.time_index.keys:
            return False
        self.max_timestamp_ms = self.time_index.max_timestamp() or NO_TIMESTAMP
        return True

    def recover(self, on_batch: Callable[[rb.BatchHeader], bool | None], min_offset: int) -> int:
        """Rescan the whole file: validate every batch, rebuild both indexes, and cut the file at
        the first torn batch, bad CRC or offset other than the next one. `on_batch` sees each
        good batch (epoch cache) and may return False to cut there. Returns the bytes cut off."""
        self._reset()
        self.next_offset = max(self.base_offset, min_offset)
        return self.resume_recovery(0, on_batch)

    def _reset(self) -> None:
        self.offset_index.reset()
        self.time_index.reset()
        self._bytes_since_index = 0
        self.max_timestamp_ms = NO_TIMESTAMP
        self.first_batch_max_timestamp_ms = NO_TIMESTAMP
        self._max_ts_relative_offset = 0

    def trust_prefix(self, recovery_point: int) -> int | None:
        """Prepare to recover only from `recovery_point` (flushed, so trusted, as the recovery
        point says): keep index entries below it and walk batch headers (no CRC) from the last
        one up to it, indexing them as an append would. Returns the position to validate from,
        or None when the indexes or headers do not line up with the recovery point (then
        recover the whole segment).

        This segment's indexes were not fsynced with each flush (index.py), so a crash may have
        lost their last entries, not always as many of one as of the other: the walk starts at
        the batch of the time index's last entry when that comes before the offset index's (the
        max timestamp so far is known there), and the entries lost are added again on the way."""
        relative = recovery_point - self.base_offset
        if relative <= 0 or not (self.offset_index.load(self.size) and self.time_index.load(_INT32_MAX)):
            return None
        self.offset_index.truncate_entries(bisect.bisect_left(self.offset_index.keys, relative))
        self.time_index.truncate_entries(bisect.bisect_left(self.time_index.values, relative))
        keys, values, times = self.offset_index.keys, self.offset_index.values, self.time_index
        index_position = values[-1] if values else 0
        expected_last = self.base_offset + keys[-1] if keys else None
        if times.keys:
            self.max_timestamp_ms, self._max_ts_relative_offset = times.keys[-1], times.values[-1]
        position = min(index_position, self.offset_index.lookup(times.values[-1])) if times.keys else 0
        if position and self.size:
            self.first_batch_max_timestamp_ms = rb.read_header(self.file.read(0, rb.HEADER_SIZE)).max_timestamp_ms
        next_offset = self.base_offset if position == 0 else None
        entry_positions = set(values[bisect.bisect_left(values, position) :])
        for header in self._headers_until_torn(position):
            if header.magic != rb.MAGIC or (next_offset is not None and header.base_offset != next_offset):
                return None
            if expected_last is not None and header.position >= index_position:
                if header.position != index_position or header.last_offset != expected_last:
                    return None  # the index entry does not describe the batch it points at
                expected_last = None
                self._bytes_since_index = self.index_interval_bytes + 1  # an entry was made here
            if header.base_offset >= recovery_point:
                break
            next_offset = header.next_offset
            self._index_batch(header.base_offset, header, header.position)
            if header.position <= index_position and header.position in entry_positions:
                # An offset entry was made here: so was a time entry if the max had grown.
                times.maybe_append(self.max_timestamp_ms, self._max_ts_relative_offset)
            position = header.position + header.size
        if next_offset != recovery_point or expected_last is not None:
            return None  # the recovery point is not a batch boundary, or the index entry not met
        return position

    def resume_recovery(self, position: int, on_batch: Callable[[rb.BatchHeader], bool | None]) -> int:
        """Validate batches from `position` (a batch start, state prepared up to it) to the end,
        indexing them, and cut the file at the first bad one. Returns the bytes cut off, a zero
        tail not counted: zeros after the last byte written are preallocation (zero_fill) or a
        write that never reached the disk, not a batch lost (a torn batch before them counts up
        to its last non-zero byte)."""
        chunk = b""
        chunk_start = position
        while position < self.size:
            offset_in_chunk = position - chunk_start
            need = rb.batch_size_at(chunk, offset_in_chunk)
            if need == 0 or offset_in_chunk + need > len(chunk):
                chunk_start = position
                chunk = self.file.read(position, max(RECOVERY_CHUNK_BYTES, need))
                offset_in_chunk = 0
            try:
                header = rb.validate(chunk, offset_in_chunk)
            except (CorruptRecordError, InvalidRecordError):
                break
            if header.base_offset != self.next_offset:
                break  # offsets are dense (no compaction here): anything else is a stale or bad tail
            header = _relocate(header, position)
            if on_batch(header) is False:
                break
            self._index_batch(header[0], header, position)
            position += header.size
        if position == self.size:
            return 0
        cut = self._content_end(position) - position
        self.file.truncate(position)
        self.size = position
        return cut

    def _content_end(self, position: int) -> int:
        """The end of the bytes from `position` on once a zero tail is left out."""
        end = at = position
        while at < self.size:
            chunk = self.file.read(at, min(RECOVERY_CHUNK_BYTES, self.size - at))
            if not chunk:
                break
            kept = len(chunk.rstrip(b"\0"))
            if kept:
                end = at + kept
            at += len(chunk)
        return end

    # -- appending -----------------------------------------------------------------------------

    def append(self, headers: list[rb.BatchHeader], *buffers: Buffer) -> int:
        """Write batches (already validated, offsets already final) given as `buffers`, whose
        concatenation holds them back to back; `headers` carry the *final* offsets and positions
        relative to that concatenation. Returns the segment position written at."""
        start = self.file.append(*buffers)
        for header in headers:
            self._index_batch(header[0], header, start + header.position)
        self.size = self.file.size()
        return start

    def append_batch(self, base_offset: int, header: tuple[int, ...], data: Buffer, rest: Buffer | None = None) -> int:
        """Append one batch given as `data` (+ `rest`: a new 16-byte prefix and the rest of the
        batch, or the whole batch in `data`) whose final base offset is `base_offset` (the header,
        a BatchHeader or its 13 fields as a plain tuple, may still carry the producer's offsets).
        The leader's fast path: nothing rebuilt."""
        position = self.file.append(data) if rest is None else self.file.append(data, rest)
        size = header[1] + _LOG_OVERHEAD
        if (header[8] > self.max_timestamp_ms or self._bytes_since_index > self.index_interval_bytes
                or self.first_batch_max_timestamp_ms == NO_TIMESTAMP):  # fmt: skip
            self._index_batch(base_offset, header, position)
        else:  # what _index_batch does when there is no entry to add and no new max timestamp
            self._bytes_since_index += size
            self.next_offset = base_offset + header[6] + 1
        self.size = position + size
        return position

    def _index_batch(self, base_offset: int, header: tuple[int, ...], position: int) -> None:
        max_ts = header[8]  # max_timestamp_ms (tuple indexing: this runs once per batch)
        last_offset = base_offset + header[6]
        if self.first_batch_max_timestamp_ms == NO_TIMESTAMP:
            self.first_batch_max_timestamp_ms = max_ts
        if max_ts > self.max_timestamp_ms:
            self.max_timestamp_ms = max_ts
            self._max_ts_relative_offset = last_offset - self.base_offset
        if self._bytes_since_index > self.index_interval_bytes:
            relative = last_offset - self.base_offset
            keys = self.offset_index.keys
            if not keys or relative > keys[-1]:
                keys.append(relative)
                self.offset_index.values.append(position)
                times = self.time_index.keys
                if not times or self.max_timestamp_ms > times[-1]:
                    self.time_index.maybe_append(self.max_timestamp_ms, self._max_ts_relative_offset)
            self._bytes_since_index = 0
        self._bytes_since_index += header[1] + _LOG_OVERHEAD
        self.next_offset = last_offset + 1

    def seal(self) -> None:
        """The segment stops being active: record its max timestamp as the last time entry, and
        give back the space reserved past its end (Kafka trims a preallocated segment on roll).
        The cut is durable at the segment's next fsync, which the roll makes (PartitionLog.roll):
        a segment that is not the last holds no zero tail once its successor exists on disk."""
        if self.max_timestamp_ms != NO_TIMESTAMP:
            self.time_index.maybe_append(self.max_timestamp_ms, self._max_ts_relative_offset)
        self.file.truncate(self.file.size())  # its own size: this cuts nothing, whatever happens
        self.offset_index.flush()
        self.time_index.flush()

    # -- reading -------------------------------------------------------------------------------

    def iter_headers(self, position: int = 0) -> Iterator[rb.BatchHeader]:
        """Headers of the batches from `position` (a batch start) on, read in chunks (no CRC
        check: the segment's content was validated when written or recovered)."""
        chunk = b""
        chunk_start = position
        while position < self.size:
            at = position - chunk_start
            if len(chunk) - at < rb.HEADER_SIZE:
                chunk_start, at = position, 0
                chunk = self.file.read(position, max(self.index_interval_bytes * 2, rb.HEADER_SIZE))
            header = rb.read_header(chunk, at)
            yield _relocate(header, position)
            position += header.size

    def _headers_until_torn(self, position: int) -> Iterator[rb.BatchHeader]:
        """`iter_headers`, stopping quietly at a torn header (a crash's tail, not yet recovered)."""
        headers = self.iter_headers(position)
        while True:
            try:
                yield next(headers)
            except (StopIteration, CorruptRecordError):
                return

    def find_position(self, offset: int) -> tuple[int, rb.BatchHeader] | None:
        """Start position and header of the first batch whose last offset >= `offset`."""
        position = self.offset_index.lookup(offset - self.base_offset - 1) if offset > self.base_offset else 0
        for header in self.iter_headers(position):
            if header.last_offset >= offset:
                return header.position, header
        return None

    def read(self, offset: int, max_bytes: int, max_offset: int, min_one: bool) -> tuple[bytes, int]:
        """Whole batches from the one containing `offset`, at most `max_bytes` (but at least one
        batch if `min_one`), none reaching `max_offset`; and the offset after the last batch.
        Raw bytes: no record is decoded, and the end is found through the index (a walk of at
        most ~index.interval.bytes of headers), not by walking every batch read."""
        found = self.find_position(offset)
        if found is None:
            return b"", offset
        position, first = found
        if first.last_offset >= max_offset:
            return b"", first.base_offset
        limit_position, limit_offset = self.size, self.next_offset
        if max_offset < self.next_offset:
            bound = self.find_position(max_offset)
            if bound is not None:
                limit_position, limit_offset = bound[0], bound[1].base_offset
        want = position + max_bytes
        if want >= limit_position:
            return self.file.read(position, limit_position - position), limit_offset
        end, end_offset = self._batch_boundary_at_or_below(want, position)
        if end == position:  # the first batch alone is larger than max_bytes
            if not min_one:
                return b"", first.base_offset
            end, end_offset = position + first.size, first.next_offset
        return self.file.read(position, end - position), end_offset

    def _batch_boundary_at_or_below(self, target: int, floor: int) -> tuple[int, int]:
        """The largest batch start <= `target` (>= `floor`, a batch start) and its base offset."""
        values = self.offset_index.values
        i = bisect.bisect_right(values, target) - 1
        start = max(floor, values[i]) if i >= 0 else floor
        boundary, boundary_offset = start, -1
        for header in self.iter_headers(start):
            if header.position > target:
                break
            boundary, boundary_offset = header.position, header.base_offset
        return boundary, boundary_offset

    # -- truncation, flush, deletion ---------------------------------------------------------

    def truncate_to(self, offset: int, on_batch: Callable[[rb.BatchHeader], bool | None]) -> int:
        """Remove the batch containing `offset` and everything after; returns the new next
        offset (a batch boundary, <= offset). Indexes are rebuilt from the kept batches."""
        found = self.find_position(offset)
        if found is None:
            return self.next_offset
        position, _ = found
        self.file.truncate(position)
        self.size = position
        self.recover(on_batch, self.base_offset)  # re-derives indexes and max timestamp
        return self.next_offset

    def flush(self, *, sync_indexes: bool = True) -> None:
        """fsync the segment file. Its indexes are written first, and fsynced unless
        `sync_indexes` is False: the log passes False for its active segment, whose indexes are
        not made durable with each flush; recovery rebuilds what a crash lost of them (index.py,
        trust_prefix)."""
        if sync_indexes:
            for index in (self.offset_index, self.time_index):
                index.fsync()
                index.release()  # a sealed segment's indexes change again only on recovery
        else:
            self.offset_index.flush()
            self.time_index.flush()
        self.file.fsync()

    def close(self) -> None:
        """Close the files; the indexes are fsynced (a clean close), the segment file is not."""
        for index in (self.offset_index, self.time_index):
            index.fsync()
            index.release()
        self.file.close()

    def delete(self) -> None:
        self.file.close()
        self.offset_index.release()
        self.time_index.release()
        for path in (self.log_path, self.offset_index.path, self.time_index.path):
            if self.storage.exists(path):
                self.storage.remove(path)


def _relocate(header: rb.BatchHeader, position: int) -> rb.BatchHeader:
    """The same header with `position` set to a segment file position."""
    return rb.BatchHeader._make((*header[:-1], position))
