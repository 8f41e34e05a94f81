"""The log of one partition (Kafka's UnifiedLog + LocalLog + LogLoader), over a `Storage`.

Layout: `<log_dir>/<topic>-<partition>/` holds segments `<20-digit base>.log` with `.index` and
`.timeindex`, producer snapshots `<offset>.snapshot`, `leader-epoch-checkpoint` and
`partition.metadata` (the topic id, KIP-516: written before the first segment when the log is
opened with one, so a directory never holds data without its topic id). The per-dir
checkpoint files (recovery point, HW, log start) belong to `LogManager`, which passes their
values in when it opens a log.

Invariants:
- log_start_offset <= high_watermark <= log_end_offset; recovery_point <= log_end_offset;
- offsets are dense and strictly increasing across batches and segments; the last segment is the
  active one and the only one appended to; there is always at least one segment;
- the epoch cache holds no epoch starting at or after the log end offset;
- every check on an append (CRC, offsets, producer sequence) runs before the first byte is
  written, so a rejected append changes nothing;
- nothing at or above the high watermark and never the active segment is removed by retention.

Recovery on open (Kafka LogLoader): segments wholly below the recovery point are trusted and not
read (their indexes are loaded and sanity-checked, rebuilt if not sane); in the segment holding
the recovery point, batches from the recovery point on (the whole segment if its index does not
line up with it) and all later segments are validated batch by batch and cut at the first torn
batch, bad CRC or offset-order break; later segments are then dropped. A zero tail (zero-filled
preallocation, `LogConfig.preallocate`) ends a segment the same way but is not a loss: it is cut
without the warning, and drops nothing. The epoch cache is rebuilt for
the rescanned range from the batches' partitionLeaderEpoch and trimmed to the log end; producer
state is loaded from the newest snapshot at or below the log end and replayed from the log.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator
from typing import NamedTuple, assert_never

import structlog

from partition.log import batch as rb
from partition.log import producer_state as ps
from partition.log.checkpoint import (
    FENCED_EPOCH_CHECKPOINT,
    LEADER_EPOCH_CHECKPOINT,
    PARTITION_METADATA_FILE,
    read_fenced_epoch,
    read_partition_metadata,
    write_fenced_epoch,
    write_partition_metadata,
)
from partition.log.config import LogConfig
from partition.log.epoch_cache import LeaderEpochCache
from partition.log.errors import (
    CorruptRecordError,
    FencedLeaderEpochError,
    InvalidProducerEpochError,
    InvalidRecordError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    RecordTooLargeError,
    UnexpectedAppendOffsetError,
)
from partition.log.segment import LogSegment, segment_name
from partition.log.storage import Buffer, Storage

_INT32_MAX = (1 << 31) - 1
_PREFIX_PACK = rb.patched_prefix_struct.pack  # baseOffset, batchLength, partitionLeaderEpoch
_SEGMENT_SUFFIXES = (".log", ".index", ".timeindex")
_SMALL_BATCH_BYTES = 2048


class LogAppendInfo(NamedTuple):
    """Result of an append. `duplicate` means an idempotent retry: nothing was written and the
    offsets are those of the original batch (DUPLICATE_SEQUENCE_NUMBER, treated as success).
    A NamedTuple, not a frozen dataclass: one is built per append, on the hot path."""

    first_offset: int
    last_offset: int
    record_count: int
    size_bytes: int
    duplicate: bool = False


# tuple.__new__ skips the NamedTuple's keyword-handling __new__ (a third of the cost of building
# one on the append path; the fields are the same five, in order).
_new_info = tuple.__new__
_validate_one = rb.validate_one


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


class PartitionLog:
    """One partition's log. Open with `PartitionLog.open`; see the module docstring."""

    def __init__(self, storage: Storage, log_dir: str, topic: str, partition: int, config: LogConfig) -> None:
        self.storage = storage
        self.topic = topic
        self.partition = partition
        self.config = config
        self.directory = f"{log_dir}/{partition_dir_name(topic, partition)}"
        self.segments: list[LogSegment] = []
        self.log_start_offset = 0
        self.log_end_offset = 0
        self.high_watermark = 0
        self.recovery_point = 0
        self.epoch_cache = LeaderEpochCache(None, None)
        # The topic id in partition.metadata (KIP-516); None: not recorded (an older layout, or
        # a log opened without one, like the Raft log).
        self.topic_id: str | None = None
        self.producer_state = ps.ProducerState()
        self._unflushed_messages = 0
        self._last_flush_ms: int | None = None
        self._dir_dirty = False
        self._dirty: list[LogSegment] = []  # segments written or truncated since the last flush
        # Called after a truncation (LogManager writes its checkpoints): a recovery point left on
        # disk above a truncation would let a later crash skip validating rewritten batches.
        self.on_truncated: Callable[[], None] | None = None
        self._log = structlog.get_logger().bind(topic=topic, partition=partition)

    # ------------------------------------------------------------------------------ opening

    @classmethod
    def open(
        cls, storage: Storage, log_dir: str, topic: str, partition: int,
        config: LogConfig | None = None, *, recovery_point: int = 0, log_start_offset: int = 0,
        high_watermark: int = 0, topic_id: str | None = None,
    ) -> PartitionLog:  # fmt: skip
        """Open (creating if missing) and recover the log; see the module docstring. With
        `topic_id`, a directory that records none adopts it (written before any segment); one
        that records another is the caller's to set aside first (LogManager.get_or_create)."""
        log = cls(storage, log_dir, topic, partition, config or LogConfig())
        storage.make_dirs(log.directory)
        log.topic_id = read_partition_metadata(storage, f"{log.directory}/{PARTITION_METADATA_FILE}")
        if topic_id is not None and log.topic_id is None:
            log.write_topic_id(topic_id)
        log.epoch_cache = LeaderEpochCache(storage, f"{log.directory}/{LEADER_EPOCH_CHECKPOINT}")
        log._load(recovery_point, log_start_offset)
        log.high_watermark = min(max(high_watermark, log.log_start_offset), log.log_end_offset)
        return log

    def _load(self, recovery_point: int, log_start_offset: int) -> None:
        names = self.storage.list_dir(self.directory)
        bases = sorted(int(n[:-4]) for n in names if n.endswith(".log") and n[:-4].isdigit())
        for name in names:  # index files whose segment is gone, and half-written temp files
            stem, dot, suffix = name.partition(".")
            if name.endswith(".tmp") or (stem.isdigit() and f".{suffix}" in _SEGMENT_SUFFIXES[1:]
                                         and int(stem) not in bases):  # fmt: skip
                self.storage.remove(f"{self.directory}/{name}")
        if not bases:
            bases = [log_start_offset]
            self._dir_dirty = True  # a new segment file: its name is durable after fsync_dir
        ix = self.config.index_interval_bytes
        zero_fill = self.config.preallocate
        self.segments = [LogSegment(self.storage, self.directory, b, ix, zero_fill) for b in bases]
        first_dirty = max(bisect.bisect_right(bases, recovery_point) - 1, 0)
        for i in range(first_dirty):
            if not self.segments[i].load_closed(bases[i + 1]):
                self.segments[i].recover(lambda h: None, bases[i])  # index not sane: rebuild it
                self._dirty.append(self.segments[i])
        # Within the segment holding the recovery point, only what follows it is validated again
        # when the indexes line up with it; otherwise that whole segment is (Kafka's granularity).
        resume = self.segments[first_dirty].trust_prefix(recovery_point)
        self.epoch_cache.truncate_from_end(bases[first_dirty] if resume is None else recovery_point)
        self._recover_from(first_dirty, resume)
        for segment in self._dirty:
            # A rebuilt segment that is not the last gets the time entry its roll gave it (the
            # max timestamp; LogSegment.recover in Kafka appends it too): recovery ends with the
            # indexes the segment had, and its zero tail, if any, is cut as the roll cut it.
            if segment in self.segments[:-1]:
                segment.seal()
        self.log_end_offset = self.segments[-1].next_offset
        self.log_start_offset = min(max(log_start_offset, bases[0]), self.log_end_offset)
        self.recovery_point = min(recovery_point, self.log_end_offset)
        self.epoch_cache.truncate_from_end(self.log_end_offset)
        self._repair_epoch_prefix()
        self._trim_epochs_to_start()
        self._rebuild_producer_state()

    def _trim_epochs_to_start(self) -> None:
        if not self.config.keep_epoch_history:
            self.epoch_cache.truncate_from_start(self.log_start_offset)

    def _repair_epoch_prefix(self) -> None:
        """Epochs of batches between the log start and the earliest cached epoch (headers only)."""
        earliest = self.epoch_cache.earliest()
        stop = earliest.start_offset if earliest is not None else self.log_end_offset
        if self.log_start_offset >= stop:
            return
        pairs: list[tuple[int, int]] = []
        for header in self._iter_headers_from(self.log_start_offset):
            if header.base_offset >= stop:
                break
            if header.partition_leader_epoch >= 0:
                pairs.append((header.partition_leader_epoch, max(header.base_offset, self.log_start_offset)))
        self.epoch_cache.fill_prefix(pairs)

    def _recover_from(self, first: int, resume: int | None) -> None:
        """Rescan segments[first:] (the first from position `resume` if given), cutting at the
        first bad batch and dropping what follows."""

        def on_batch(header: rb.BatchHeader) -> bool:
            epoch = header.partition_leader_epoch
            if 0 <= epoch < self.epoch_cache.latest_epoch():
                return False  # epochs never decrease along a log: a corrupt epoch field
            if epoch > self.epoch_cache.latest_epoch():
                self.epoch_cache.assign(epoch, header.base_offset)
            return True

        expected = self.segments[first].base_offset
        for i in range(first, len(self.segments)):
            segment = self.segments[i]
            if segment.base_offset != expected and i > first:
                self._drop_segments_from(i, reason="offset gap after recovery")
                return
            if i == first and resume is not None:
                cut = segment.resume_recovery(resume, on_batch)
            else:
                cut = segment.recover(on_batch, expected)
            self._dirty.append(segment)  # read back from the page cache: not known to be on disk
            expected = segment.next_offset
            if cut:
                self._log.warning("log.recovery_truncated", segment=segment.base_offset, bytes_cut=cut)
                self._drop_segments_from(i + 1, reason="after a corrupt batch")
                return

    def _drop_segments_from(self, i: int, reason: str) -> None:
        emit = self._log.info if reason == "truncation" else self._log.warning
        for segment in self.segments[i:]:
            emit("log.segment_dropped", segment=segment.base_offset, reason=reason)
            segment.delete()
            self._dir_dirty = True
        del self.segments[i:]

    def _rebuild_producer_state(self) -> None:
        """Newest producer snapshot at or below the log end, then replay batches after it."""
        self.producer_state = ps.ProducerState()
        start = self.segments[0].base_offset
        for offset in reversed(ps.list_snapshots(self.storage, self.directory)):
            if offset > self.log_end_offset or offset < start:
                self.storage.remove(ps.snapshot_path(self.directory, offset))
                self._dir_dirty = True
                continue
            try:
                self.producer_state = ps.load_snapshot(self.storage, self.directory, offset)
            except CorruptRecordError:
                continue
            start = offset
            break
        for header in self._iter_headers_from(start):
            self.producer_state.update(header)

    def _iter_headers_from(self, offset: int) -> Iterator[rb.BatchHeader]:
        i = max(bisect.bisect_right([s.base_offset for s in self.segments], offset) - 1, 0)
        for segment in self.segments[i:]:
            found = segment.find_position(offset)
            if found is None:
                continue
            for header in segment.iter_headers(found[0]):
                if header.last_offset >= offset:
                    yield header

    # ------------------------------------------------------------------------------ appends

    def append_as_leader(self, data: bytes, leader_epoch: int, *, check_crc: bool = True) -> LogAppendInfo:
        """Append batches from a producer (or the Raft leader): validate them, assign offsets from
        the log end, stamp `leader_epoch`, check idempotent sequences. Raises CorruptRecordError,
        InvalidRecordError, OutOfOrderSequenceError, InvalidProducerEpochError,
        FencedLeaderEpochError; writes nothing then. `check_crc=False` skips only the CRC, for
        bytes the caller has just validated (the replica core's produce path)."""
        first = _validate_one(data, check_crc)  # BatchHeader's order of fields
        if first is None:  # several batches, or a bad one: the general path checks and says which
            return self._append_many_as_leader(data, leader_epoch, check_crc)
        # The common case, kept lean (profiles of `kraftlab bench log`: every opcode here is paid
        # once per produced batch): one batch, written as a new 16-byte prefix (base offset,
        # length, epoch) + the caller's bytes after it.
        new_epoch = leader_epoch != self.epoch_cache.latest
        if new_epoch:
            self._check_epoch(leader_epoch)
        idempotent = first[9] >= 0  # producer_id
        if idempotent:
            duplicate = self._check_producer(rb.BatchHeader._make((*first, 0)))
            if duplicate is not None:
                return duplicate
        base = self.log_end_offset
        size = len(data)
        next_offset = base + first[6] + 1  # + last_offset_delta
        active = self.segments[-1]
        config = self.config
        if config.max_message_bytes is not None and size > config.max_message_bytes:
            raise RecordTooLargeError(f"batch of {size} bytes > max.message.bytes {config.max_message_bytes}")
        # Roll as `_append` does (`roll` leaves an empty segment alone: no size check here).
        if (active.size + size > config.segment_bytes
                or (active.first_batch_max_timestamp_ms >= 0
                    and first[8] - active.first_batch_max_timestamp_ms > config.segment_ms)
                or next_offset - active.base_offset > _INT32_MAX):  # fmt: skip
            self.roll()
            active = self.segments[-1]
        if new_epoch:
            self.epoch_cache.assign(leader_epoch, base)
        if size <= _SMALL_BATCH_BYTES:  # one buffer, one write(2): copying ~200 B costs less
            active.append_batch(base, first, _PREFIX_PACK(base, first[1], leader_epoch) + data[16:])
        else:  # the prefix and the rest, uncopied, in one writev(2)
            active.append_batch(base, first, _PREFIX_PACK(base, first[1], leader_epoch), memoryview(data)[16:])
        if not self._dirty or self._dirty[-1] is not active:
            self._dirty.append(active)
        if idempotent:
            self.producer_state.update(rb.BatchHeader._make((base, first[1], leader_epoch, *first[3:], 0)))
        self.log_end_offset = next_offset
        self._unflushed_messages += next_offset - base
        if config.fsync_each_append or config.flush_messages is not None:
            self._maybe_flush_after_append()
        return _new_info(LogAppendInfo, (base, next_offset - 1, next_offset - base, size, False))

    def _append_many_as_leader(self, data: bytes, leader_epoch: int, check_crc: bool) -> LogAppendInfo:
        headers = list(rb.iter_headers(data, check_crc=check_crc))
        if not headers:
            raise CorruptRecordError("torn batch header at 0")
        limit = self.config.max_message_bytes
        if limit is not None and any(h.batch_length + rb.LOG_OVERHEAD > limit for h in headers):
            raise RecordTooLargeError(f"a batch is larger than max.message.bytes {limit}")
        if any(h.has_producer_id for h in headers):
            raise InvalidRecordError("an idempotent produce carries exactly one batch per partition")
        self._check_epoch(leader_epoch)
        next_offset = self.log_end_offset
        final: list[rb.BatchHeader] = []
        patched = bytearray(data)
        for h in headers:
            final.append(rb.BatchHeader._make((next_offset, h.batch_length, leader_epoch, *h[3:])))
            rb.patch(patched, h.position, next_offset, leader_epoch)
            next_offset += h.last_offset_delta + 1
        self.epoch_cache.assign(leader_epoch, self.log_end_offset)
        return self._append(final, (patched,), len(data))

    def _check_producer(self, first: rb.BatchHeader) -> LogAppendInfo | None:
        """Idempotence (KIP-98): the original offsets for a duplicate, None to append, or raise."""
        result = self.producer_state.check(first.producer_id, first.producer_epoch,
                                           first.base_sequence, first.last_sequence)  # fmt: skip
        match result.outcome:
            case ps.SequenceCheck.DUPLICATE:
                assert result.duplicate_of is not None
                meta = result.duplicate_of
                return LogAppendInfo(meta.first_offset, meta.last_offset, first.record_count, 0, True)
            case ps.SequenceCheck.OUT_OF_ORDER:
                raise OutOfOrderSequenceError(
                    f"producer {first.producer_id} epoch {first.producer_epoch}: sequence "
                    f"{first.base_sequence} does not follow the last one")
            case ps.SequenceCheck.FENCED:
                raise InvalidProducerEpochError(
                    f"producer {first.producer_id}: epoch {first.producer_epoch} is fenced")
            case ps.SequenceCheck.OK:
                return None
            case _ as unreachable:
                assert_never(unreachable)

    def append_as_follower(self, data: bytes, *, check_crc: bool = True) -> LogAppendInfo:
        """Append batches fetched from the leader as they are: the first must start at the log end
        offset and offsets must increase. Epochs come from the batches (partitionLeaderEpoch)."""
        headers = list(rb.iter_headers(data, check_crc=check_crc))
        if not headers:
            raise InvalidRecordError("empty append")
        expected = self.log_end_offset
        for h in headers:
            if h.magic != rb.MAGIC:
                raise CorruptRecordError(f"magic {h.magic}")
            if h.base_offset != expected:
                raise UnexpectedAppendOffsetError(
                    f"batch at offset {h.base_offset}, expected {expected} (log end offset "
                    f"{self.log_end_offset})")
            expected = h.next_offset
            self._check_epoch(h.partition_leader_epoch)
        for h in headers:
            self.epoch_cache.assign(h.partition_leader_epoch, h.base_offset)
        return self._append(headers, (data,), len(data))

    def append_encoded(self, data: bytes, header: rb.BatchHeader) -> None:
        """Append one batch this process has just encoded at the log end, `header` its parsed
        header (the metadata log's appends, partition/raft/log.py, whose caller checked
        offsets and epochs): `append_as_follower` without parsing the bytes again."""
        if header.base_offset != self.log_end_offset:
            raise UnexpectedAppendOffsetError(
                f"batch at offset {header.base_offset}, expected {self.log_end_offset}")
        epoch = header.partition_leader_epoch
        if epoch != self.epoch_cache.latest:  # a repeat of the latest epoch assigns nothing
            self._check_epoch(epoch)
            self.epoch_cache.assign(epoch, header.base_offset)
        self._append([header], (data,), len(data))

    def _check_epoch(self, epoch: int) -> None:
        if 0 <= epoch < self.epoch_cache.latest_epoch():
            raise FencedLeaderEpochError(
                f"append with leader epoch {epoch} below the log's latest {self.epoch_cache.latest_epoch()}")

    def _append(self, headers: list[rb.BatchHeader], buffers: tuple[Buffer, ...], size: int) -> LogAppendInfo:
        last = headers[-1]
        first_offset = headers[0][0]
        next_offset = last[0] + last[6] + 1  # base_offset + last_offset_delta + 1
        active = self.segments[-1]
        config = self.config
        if active.size and (active.size + size > config.segment_bytes
                            or self._should_roll_by_time(active, headers[0].max_timestamp_ms, next_offset)):
            self.roll()
            active = self.segments[-1]
        active.append(headers, *buffers)
        if not self._dirty or self._dirty[-1] is not active:
            self._dirty.append(active)
        for h in headers:
            if h[9] >= 0:  # producer_id
                self.producer_state.update(h)
        count = next_offset - first_offset
        self.log_end_offset = next_offset
        self._unflushed_messages += count
        if config.fsync_each_append or config.flush_messages is not None:
            self._maybe_flush_after_append()
        return LogAppendInfo(first_offset, next_offset - 1, count, size, False)

    def _maybe_flush_after_append(self) -> None:
        """flush.messages, or fsync on every append when configured."""
        config = self.config
        if config.fsync_each_append or (
            config.flush_messages is not None and self._unflushed_messages >= config.flush_messages
        ):
            self.flush()

    def _should_roll_by_time(self, active: LogSegment, max_timestamp_ms: int, next_offset: int) -> bool:
        """segment.ms, measured from the first batch's max timestamp (Kafka's rollJitter aside),
        and the int32 limit of relative offsets in the index."""
        first_ts = active.first_batch_max_timestamp_ms
        by_time = first_ts >= 0 and max_timestamp_ms - first_ts > self.config.segment_ms
        return by_time or next_offset - 1 - active.base_offset > _INT32_MAX

    def roll(self) -> None:
        """Close the active segment and start a new one at the log end offset. The old segment
        is flushed and a producer snapshot taken at the new base offset (as Kafka does)."""
        active = self.segments[-1]
        if active.size == 0:
            return
        active.seal()
        if active not in self._dirty:
            # Its indexes (the seal's time entry, and every entry since the last fsync: the
            # active segment's are not fsynced per flush) and, with zero fill, the cut of its
            # zero tail: durable before the next segment's name is (recovery trusts a segment
            # that is not the last without reading it).
            self._dirty.append(active)
        self.segments.append(LogSegment(self.storage, self.directory, self.log_end_offset,
                                        self.config.index_interval_bytes, self.config.preallocate))  # fmt: skip
        self._dir_dirty = True
        # Always (Kafka too), even when empty: without a snapshot, opening the log would replay
        # every batch header from the first segment to rebuild producer state.
        ps.write_snapshot(self.storage, self.directory, self.log_end_offset, self.producer_state)
        self.flush()
        self._log.debug("log.rolled", segment=self.log_end_offset)

    # ------------------------------------------------------------------------------- reading

    def read(self, offset: int, max_bytes: int, *, max_offset: int | None = None,
             min_one: bool = True) -> bytes:  # fmt: skip
        """Raw bytes of whole batches from the one containing `offset`, at most `max_bytes` (at
        least one batch if `min_one`), none reaching `max_offset` (default: the log end; pass the
        high watermark for consumers). The first batch may start before `offset`."""
        return self.read_slice(offset, max_bytes, max_offset=max_offset, min_one=min_one)[0]

    def read_slice(self, offset: int, max_bytes: int, *, max_offset: int | None = None,
                   min_one: bool = True) -> tuple[bytes, int]:  # fmt: skip
        """`read`, plus the offset to read from next (after the last batch returned), so a
        reader moves on without parsing what it forwards."""
        if not self.log_start_offset <= offset <= self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"offset {offset} outside [{self.log_start_offset}, {self.log_end_offset}]")
        limit = self.log_end_offset if max_offset is None else min(max_offset, self.log_end_offset)
        if offset >= limit:
            return b"", offset
        i = max(bisect.bisect_right([s.base_offset for s in self.segments], offset) - 1, 0)
        for segment in self.segments[i:]:
            if offset < segment.next_offset:  # empty only if max_bytes allows no whole batch
                return segment.read(offset, max_bytes, limit, min_one)
        return b"", offset

    def read_records(self, offset: int, max_bytes: int, *, max_offset: int | None = None) -> list[rb.Record]:
        """Decoded records from `offset` on (for callers that need values, not bytes)."""
        data = self.read(offset, max_bytes, max_offset=max_offset)
        return [r for h in rb.iter_headers(data, check_crc=False) for r in rb.decode_records(data, h)
                if r.offset >= offset]  # fmt: skip

    def batch_headers(self, offset: int = 0) -> list[rb.BatchHeader]:
        """Headers of every batch with offsets >= `offset` (cheap: no record decoding)."""
        return list(self._iter_headers_from(max(offset, self.log_start_offset)))

    # -------------------------------------------------------------------- truncation, deletion

    def truncate_to(self, offset: int) -> int:
        """Remove every batch at or after `offset` (a follower after divergence). A batch that
        straddles `offset` goes whole, so the new log end offset is returned (<= offset). The
        result is flushed (everything the log holds is durable afterwards)."""
        if offset >= self.log_end_offset:
            return self.log_end_offset
        if offset < self.log_start_offset:
            raise OffsetOutOfRangeError(f"truncate to {offset} below log start {self.log_start_offset}")
        keep = max(bisect.bisect_right([s.base_offset for s in self.segments], offset) - 1, 0)
        if self.segments[keep].base_offset == offset and keep > 0:
            keep -= 1  # that segment goes whole; keep the previous one as the active segment
        self._drop_segments_from(keep + 1, reason="truncation")
        self.log_end_offset = self.segments[-1].truncate_to(offset, lambda h: None)
        if self.segments[-1] not in self._dirty:
            self._dirty.append(self.segments[-1])
        self._after_truncation()
        # Made durable at once (Kafka leaves it to the next flush): a crash never brings truncated
        # batches back, and the recovery point can never sit above what the disk holds.
        self.flush()
        if self.on_truncated is not None:
            self.on_truncated()
        self._log.info("log.truncated", requested=offset, log_end_offset=self.log_end_offset)
        return self.log_end_offset

    def truncate_fully(self, new_start: int) -> None:
        """Delete everything and restart the log empty at `new_start` (a replica rebuilt from
        scratch, or a Raft follower installing a snapshot)."""
        self._drop_segments_from(0, reason="truncate fully")
        self.segments = [LogSegment(self.storage, self.directory, new_start, self.config.index_interval_bytes,
                                    self.config.preallocate)]  # fmt: skip
        for offset in ps.list_snapshots(self.storage, self.directory):
            self.storage.remove(ps.snapshot_path(self.directory, offset))
        self.log_start_offset = self.log_end_offset = self.recovery_point = new_start
        self.epoch_cache.clear()
        self._after_truncation()
        self.flush()
        if self.on_truncated is not None:
            self.on_truncated()
        self._log.info("log.truncated_fully", log_start_offset=new_start)

    def _after_truncation(self) -> None:
        self.high_watermark = min(self.high_watermark, self.log_end_offset)
        self.recovery_point = min(self.recovery_point, self.log_end_offset)
        self.log_start_offset = min(self.log_start_offset, self.log_end_offset)
        self.epoch_cache.truncate_from_end(self.log_end_offset)
        self._rebuild_producer_state()

    def update_high_watermark(self, high_watermark: int) -> int:
        """Set the HW, clamped to [log_start_offset, log_end_offset]; returns the value kept."""
        self.high_watermark = min(max(high_watermark, self.log_start_offset), self.log_end_offset)
        return self.high_watermark

    def delete_prefix(self, offset: int, *, check_high_watermark: bool = True) -> int:
        """Move the log start offset up to `offset` (DeleteRecords, snapshot-covered Raft prefix)
        and delete segments wholly below it. Returns the number of segments deleted."""
        limit = self.high_watermark if check_high_watermark else self.log_end_offset
        if offset > limit:
            raise OffsetOutOfRangeError(f"cannot delete below {offset}: above {limit}")
        if offset <= self.log_start_offset:
            return 0
        self.log_start_offset = offset
        self._trim_epochs_to_start()
        return self._delete_segments(lambda seg, nxt: nxt <= offset)

    def apply_retention(self, now_ms: int) -> int:
        """retention.ms then retention.bytes, oldest segments first, never the active segment and
        never a segment with offsets at or above the high watermark. Returns segments deleted."""
        hw = self.high_watermark
        deleted = 0
        if self.config.retention_ms >= 0:
            deleted += self._delete_segments(
                lambda seg, nxt: nxt <= hw and seg.max_timestamp_ms >= 0
                and now_ms - seg.max_timestamp_ms > self.config.retention_ms)  # fmt: skip
        if self.config.retention_bytes >= 0:
            excess = sum(s.size for s in self.segments) - self.config.retention_bytes

            def over(seg: LogSegment, nxt: int) -> bool:
                nonlocal excess
                if nxt <= hw and excess - seg.size >= 0:
                    excess -= seg.size
                    return True
                return False

            deleted += self._delete_segments(over)
        return deleted

    def _delete_segments(self, predicate: Callable[[LogSegment, int], bool]) -> int:
        """Delete the longest prefix of non-active segments for which predicate(segment,
        next segment's base) holds; the log start moves to the first kept segment."""
        count = 0
        while len(self.segments) > 1 and predicate(self.segments[0], self.segments[1].base_offset):
            segment = self.segments.pop(0)
            segment.delete()
            self._dir_dirty = True
            count += 1
            self._log.info("log.segment_deleted", segment=segment.base_offset)
        if count:
            first = self.segments[0].base_offset
            self.log_start_offset = max(self.log_start_offset, first)
            self.high_watermark = max(self.high_watermark, self.log_start_offset)
            self.recovery_point = max(self.recovery_point, first)
            self._trim_epochs_to_start()
            for offset in ps.list_snapshots(self.storage, self.directory):
                if offset < first:
                    self.storage.remove(ps.snapshot_path(self.directory, offset))
        return count

    # ---------------------------------------------------------------------------------- flush

    def flush(self) -> None:
        """fsync every segment written or truncated since the last flush (with its indexes, but
        the active segment's indexes are only written: recovery does not trust them past what the
        segment confirms, docs/storage.md "Index durability") and, if segments were created or
        removed, the directory; the recovery point becomes the log end."""
        active = self.segments[-1]
        for segment in self._dirty:
            if segment in self.segments:
                segment.flush(sync_indexes=segment is not active)
        self._dirty.clear()
        self.epoch_cache.persist_if_changed()  # before the recovery point moves past its entries
        if self._dir_dirty:
            self.storage.fsync_dir(self.directory)
            self._dir_dirty = False
        self.recovery_point = self.log_end_offset
        self._unflushed_messages = 0

    def read_fenced_epoch(self) -> int:
        """replication.mode=quorum: the highest fenced epoch this replica reported at (-1)."""
        return read_fenced_epoch(self.storage, f"{self.directory}/{FENCED_EPOCH_CHECKPOINT}")

    def write_fenced_epoch(self, epoch: int) -> None:
        """Persist it (atomically, fsynced) before the position report that depends on it."""
        write_fenced_epoch(self.storage, f"{self.directory}/{FENCED_EPOCH_CHECKPOINT}", epoch)

    def write_topic_id(self, topic_id: str) -> None:
        """Record the topic id in partition.metadata (atomically, fsynced)."""
        write_partition_metadata(self.storage, f"{self.directory}/{PARTITION_METADATA_FILE}", topic_id)
        self.topic_id = topic_id

    def maybe_flush(self, now_ms: int) -> bool:
        """flush.ms: flush if that long passed since the last flush. Returns True if it flushed."""
        if self._last_flush_ms is None:
            self._last_flush_ms = now_ms
        if self.config.flush_ms is None or now_ms - self._last_flush_ms < self.config.flush_ms:
            return False
        self._last_flush_ms = now_ms
        self.flush()
        return True

    def close(self) -> None:
        """Snapshot producer state at the log end and close files (no fsync: call flush first
        for a clean shutdown)."""
        if self.segments:
            ps.write_snapshot(self.storage, self.directory, self.log_end_offset, self.producer_state)
        self.epoch_cache.persist_if_changed()
        for segment in self.segments:
            segment.close()

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    def segment_files(self) -> list[str]:
        return [segment_name(s.base_offset, ".log") for s in self.segments]
