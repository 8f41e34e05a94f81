"""RecordBatch v2 (magic 2), byte for byte as Kafka lays it out on disk and on the wire
(clients/.../record/DefaultRecordBatch.java, DefaultRecord.java; KIP-98).

    offset  field                 type     note
    0       baseOffset            int64    patched by the leader (not under the CRC)
    8       batchLength           int32    bytes after this field
    12      partitionLeaderEpoch  int32    patched by the leader (not under the CRC)
    16      magic                 int8     2
    17      crc                   uint32   CRC-32C of bytes [21, end)
    21      attributes            int16    bits 0-2 compression (0 only), 3 timestampType,
                                           4 isTransactional, 5 isControl
    23      lastOffsetDelta       int32
    27      baseTimestamp         int64
    35      maxTimestamp          int64
    43      producerId            int64    -1 when not idempotent
    51      producerEpoch         int16
    53      baseSequence          int32
    57      recordCount           int32
    61      records...

Each record: length varint (zigzag, bytes after it), attributes int8 (0), timestampDelta varlong,
offsetDelta varint, keyLength varint (-1 = null), key, valueLength varint (-1 = null), value,
headerCount varint, then per header keyLength varint + UTF-8 key, valueLength varint + value.

The point of the format (and of this module) is to avoid work: `read_header` parses the 61-byte
header with one struct call and never touches the records; `validate` checks sizes, magic and the
CRC in C (the crc32c package); `patch` rewrites base offset and leader epoch in place, which the CRC
does not cover, so nothing is recomputed. Only `decode_records` walks records, for callers that
need values (the Raft adapter, consumers that render JSON).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import crc32c as _crc32c

from partition.log.errors import CorruptRecordError, InvalidRecordError

MAGIC = 2
HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: bytes not counted in batchLength
CRC_START = 21  # the CRC covers [attributes, end of batch)
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08  # 0 = CreateTime, 1 = LogAppendTime
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20

_HEADER = struct.Struct(">qiibIhiqqqhii")
_PREFIX = patched_prefix_struct = struct.Struct(">qii")  # baseOffset, batchLength, partitionLeaderEpoch
_LENGTH = struct.Struct(">qi")
assert _HEADER.size == HEADER_SIZE


class BatchHeader(NamedTuple):
    """The 61-byte header of one batch; `position` is where it starts in the buffer it came from.
    A NamedTuple rather than a frozen dataclass: it is built once per batch on the append and
    read paths, and a tuple is built several times faster (a profile of `kraftlab bench log`)."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp_ms: int
    max_timestamp_ms: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int
    position: int = 0

    @property
    def size(self) -> int:
        """Bytes of the whole batch, header included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        # Sequences wrap at int32 max (Kafka DefaultRecordBatch.incrementSequence).
        return (self.base_sequence + self.last_offset_delta) % (1 << 31)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0


@dataclass(frozen=True, slots=True)
class Record:
    """A record to encode, or one decoded (then `offset` and `timestamp_ms` are absolute)."""

    value: bytes | None
    key: bytes | None = None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    timestamp_ms: int = 0
    offset: int = -1


def crc32c(buf: bytes | bytearray | memoryview, start: int, end: int) -> int:
    """CRC-32C of buf[start:end], hardware-accelerated, without copying the slice: the `crc32c`
    package reads any buffer (google_crc32c takes only `bytes`, so a slice would be copied first,
    which cost ~2 us per 100 KB batch on the append path; see docs/benchmarks.md)."""
    return int(_crc32c.crc32c(memoryview(buf)[start:end]))


# -------------------------------------------------------------------------------- varints


def _zigzag(n: int) -> int:
    return (n << 1) ^ (n >> 63)


def write_varint(out: bytearray, n: int) -> None:
    """Zigzag then unsigned LEB128, as Kafka's ByteUtils.writeVarint/writeVarlong."""
    u = _zigzag(n) & 0xFFFFFFFFFFFFFFFF
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)


def read_varint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    """Decode one zigzag varint at `pos`; returns (value, next position)."""
    shift = 0
    u = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise CorruptRecordError("truncated or overlong varint")
        b = buf[pos]
        pos += 1
        u |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
    return (u >> 1) ^ -(u & 1), pos


def _write_bytes(out: bytearray, data: bytes | None) -> None:
    if data is None:
        write_varint(out, -1)
    else:
        write_varint(out, len(data))
        out += data


def _read_bytes(buf: bytes | memoryview, pos: int) -> tuple[bytes | None, int]:
    n, pos = read_varint(buf, pos)
    if n < 0:
        return None, pos
    if pos + n > len(buf):
        raise CorruptRecordError("record field runs past the batch")
    return bytes(buf[pos : pos + n]), pos + n


# ------------------------------------------------------------------------------- encoding


def encode_record(out: bytearray, record: Record, offset_delta: int, timestamp_delta: int) -> None:
    body = bytearray(b"\x00")  # attributes: unused in v2, always 0
    write_varint(body, timestamp_delta)
    write_varint(body, offset_delta)
    _write_bytes(body, record.key)
    _write_bytes(body, record.value)
    write_varint(body, len(record.headers))
    for name, value in record.headers:
        _write_bytes(body, name.encode("utf-8"))
        _write_bytes(body, value)
    write_varint(out, len(body))
    out += body


def encode_batch(
    records: Sequence[Record],
    *,
    base_offset: int = 0,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    is_transactional: bool = False,
    is_control: bool = False,
    log_append_time: bool = False,
) -> bytes:
    """Encode records (offset deltas 0..n-1, timestamps from each record) into one batch."""
    if not records:
        raise InvalidRecordError("a batch needs at least one record")
    base_ts = records[0].timestamp_ms
    max_ts = max(r.timestamp_ms for r in records)
    body = bytearray()
    for delta, record in enumerate(records):
        encode_record(body, record, delta, record.timestamp_ms - base_ts)
    attributes = (
        (TIMESTAMP_TYPE_BIT if log_append_time else 0)
        | (TRANSACTIONAL_BIT if is_transactional else 0)
        | (CONTROL_BIT if is_control else 0)
    )
    out = bytearray(HEADER_SIZE)
    out += body
    _HEADER.pack_into(
        out, 0, base_offset, len(out) - LOG_OVERHEAD, partition_leader_epoch, MAGIC, 0,
        attributes, len(records) - 1, base_ts, max_ts, producer_id, producer_epoch,
        base_sequence, len(records),
    )  # fmt: skip
    struct.pack_into(">I", out, 17, crc32c(out, CRC_START, len(out)))
    return bytes(out)


def _unsigned_varint(n: int) -> bytes:
    out = bytearray()
    write_varint(out, n)
    return bytes(out)


# The varints of small non-negative ints (offset deltas, lengths), built once: the values-only
# encoder below writes two or three per record.
_SMALL_VARINTS = tuple(_unsigned_varint(n) for n in range(1 << 14))
_SMALL_VARINT_LIMIT = len(_SMALL_VARINTS)
_ZERO_HEADER = bytes(HEADER_SIZE)
_CRC_FIELD = struct.Struct(">I")


def encode_values_batch(
    values: Sequence[bytes],
    *,
    base_offset: int = 0,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    is_control: bool = False,
) -> bytes:
    """`encode_batch([Record(v) for v in values], ...)` byte for byte, without a Record or a
    record buffer per value: keyless, headerless records, timestamps 0, no producer. The metadata
    log's append encodes every Raft entry this way (partition/raft/log.py)."""
    count = len(values)
    if not count:
        raise InvalidRecordError("a batch needs at least one record")
    small, limit = _SMALL_VARINTS, _SMALL_VARINT_LIMIT
    if count == 1 and len(values[0]) < limit - 8:
        # One small value (a lone metadata write): the loop below, unrolled. Offset delta 0.
        value = values[0]
        length = small[len(value)]
        body = small[5 + len(length) + len(value)]
        out = bytearray().join((_ZERO_HEADER, body, b"\x00\x00\x00\x01", length, value, b"\x00"))
    else:
        parts: list[bytes] = [_ZERO_HEADER]
        add = parts.append
        for delta, value in enumerate(values):
            n = len(value)
            d = small[delta] if delta < limit else _unsigned_varint(delta)
            length = small[n] if n < limit else _unsigned_varint(n)
            # attributes 0, timestamp delta 0 | offset delta | key null (-1) | value | 0 headers
            body_size = 4 + len(d) + len(length) + n
            add(small[body_size] if body_size < limit else _unsigned_varint(body_size))
            add(b"\x00\x00")
            add(d)
            add(b"\x01")
            add(length)
            add(value)
            add(b"\x00")
        out = bytearray().join(parts)
    _HEADER.pack_into(
        out, 0, base_offset, len(out) - LOG_OVERHEAD, partition_leader_epoch, MAGIC, 0,
        CONTROL_BIT if is_control else 0, count - 1, 0, 0, NO_PRODUCER_ID, NO_PRODUCER_EPOCH,
        NO_SEQUENCE, count,
    )  # fmt: skip
    with memoryview(out) as view:
        _CRC_FIELD.pack_into(out, 17, _crc32c.crc32c(view[CRC_START:]))
    return bytes(out)


# -------------------------------------------------------------------------------- reading

_UNPACK_HEADER = _HEADER.unpack_from
_SMALL_BATCH = 2048  # below this, slicing bytes (a copy) beats a memoryview (two objects)
_make_header = BatchHeader._make
_crc = _crc32c.crc32c


def read_header(buf: bytes | bytearray | memoryview, position: int = 0) -> BatchHeader:
    """Parse the header at `position` without touching the records or checking the CRC.
    Raises CorruptRecordError when fewer than 61 bytes remain."""
    if len(buf) - position < HEADER_SIZE:
        raise CorruptRecordError(f"torn batch header at {position}")
    return BatchHeader._make((*_HEADER.unpack_from(buf, position), position))


def batch_size_at(buf: bytes | bytearray | memoryview, position: int) -> int:
    """Size of the batch at `position` from its first 12 bytes (0 if they are not all there)."""
    if len(buf) - position < LOG_OVERHEAD:
        return 0
    return int(_LENGTH.unpack_from(buf, position)[1]) + LOG_OVERHEAD


def validate(buf: bytes | bytearray | memoryview, position: int = 0) -> BatchHeader:
    """Check one batch at `position`: whole (not torn), magic 2, sane sizes, no compression,
    CRC-32C matching. Returns its header; raises CorruptRecordError / InvalidRecordError."""
    return _make_header((*validate_fields(buf, position), position))


def validate_fields(buf: bytes | bytearray | memoryview, position: int = 0, *,
                    check_crc: bool = True) -> tuple[int, ...]:  # fmt: skip
    """`validate`, returning the header's 13 fields as a plain tuple (BatchHeader's order, without
    `position`): the leader's append path reads three of them, and building the NamedTuple cost
    about a tenth of a one-record append (a profile of `kraftlab bench log`). `check_crc=False`
    only for bytes whose CRC the caller has just checked (the replica core validates a produce
    before its AppendAsLeader): every other check is still made."""
    if len(buf) - position < HEADER_SIZE:
        raise CorruptRecordError(f"torn batch header at {position}")
    fields = _UNPACK_HEADER(buf, position)
    if fields[3] != MAGIC:
        raise CorruptRecordError(f"magic {fields[3]} at {position}, expected {MAGIC}")
    batch_length = fields[1]
    if batch_length < HEADER_SIZE - LOG_OVERHEAD:
        raise CorruptRecordError(f"batch length {batch_length} at {position}")
    end = position + batch_length + LOG_OVERHEAD
    if end > len(buf):
        raise CorruptRecordError(
            f"torn batch at {position}: {len(buf) - position} of {batch_length + LOG_OVERHEAD} bytes")
    if not check_crc:
        pass
    elif position == 0 and type(buf) is bytes and end - CRC_START <= _SMALL_BATCH:
        actual = _crc32c.crc32c(buf[CRC_START:end])  # a small copy is cheaper than a memoryview
    else:
        actual = _crc32c.crc32c(memoryview(buf)[position + CRC_START : end])
    if check_crc and actual != fields[4]:
        raise CorruptRecordError(f"CRC mismatch at {position}: stored {fields[4]:#010x}, computed {actual:#010x}")
    last_offset_delta, record_count = fields[6], fields[12]
    if last_offset_delta < 0 or not 0 <= record_count <= last_offset_delta + 1:
        raise CorruptRecordError(f"record count {record_count} vs last offset delta {last_offset_delta}")
    if fields[5] & COMPRESSION_MASK:
        raise InvalidRecordError("compressed batches are not supported (compression must be none)")
    return fields


def validate_one(buf: bytes | bytearray | memoryview, check_crc: bool) -> tuple[int, ...] | None:
    """The leader's one-batch fast path: the header's 13 fields (as `validate_fields`) when `buf`
    is exactly one batch of at least one record passing every check `validate_fields` makes,
    else None, whatever the reason (several batches, or a bad one): the caller then takes the
    general path, which says what is wrong. One call, positional, no error formatting: this runs
    once per produced batch."""
    size = len(buf)
    if size < HEADER_SIZE:
        return None
    fields = _UNPACK_HEADER(buf)
    # batchLength covers the whole buffer (so it is >= 49), magic 2, no compression, and
    # 0 < recordCount <= lastOffsetDelta + 1 (stricter than validate_fields, which lets an empty
    # batch through: the general path takes that one).
    if (fields[1] != size - LOG_OVERHEAD or fields[3] != MAGIC or fields[5] & COMPRESSION_MASK
            or not 0 < fields[12] <= fields[6] + 1):  # fmt: skip
        return None
    if check_crc and _crc(buf[CRC_START:] if size <= _SMALL_BATCH else memoryview(buf)[CRC_START:]) != fields[4]:
        return None
    return fields


def iter_headers(
    buf: bytes | bytearray | memoryview, *, check_crc: bool = True
) -> Iterator[BatchHeader]:
    """Headers of consecutive batches filling `buf` exactly; raises on a torn or bad batch."""
    position = 0
    while position < len(buf):
        header = validate(buf, position) if check_crc else read_header(buf, position)
        if position + header.size > len(buf):
            raise CorruptRecordError(f"torn batch at {position}")
        yield header
        position += header.size


def patch(buf: bytearray, position: int, base_offset: int, partition_leader_epoch: int) -> None:
    """Rewrite base offset and leader epoch in place. Both sit before the CRC's range (Kafka's
    design), so the stored CRC stays valid."""
    struct.pack_into(">q", buf, position, base_offset)
    struct.pack_into(">i", buf, position + 12, partition_leader_epoch)


def patched_prefix(header: BatchHeader, base_offset: int, partition_leader_epoch: int) -> bytes:
    """The first 16 bytes of `header`'s batch with a new base offset and leader epoch, so the log
    can write prefix + the untouched rest (a vectored write, no copy of the batch)."""
    return _PREFIX.pack(base_offset, header.batch_length, partition_leader_epoch)


def decode_records(buf: bytes | bytearray | memoryview, header: BatchHeader) -> list[Record]:
    """Walk the records of a validated batch. Offsets and timestamps come out absolute."""
    view = memoryview(buf)[header.position : header.position + header.size]
    pos = HEADER_SIZE
    records: list[Record] = []
    for _ in range(header.record_count):
        length, pos = read_varint(view, pos)
        end = pos + length
        if length < 0 or end > len(view):
            raise CorruptRecordError("record runs past the batch")
        pos += 1  # record attributes
        ts_delta, pos = read_varint(view, pos)
        offset_delta, pos = read_varint(view, pos)
        key, pos = _read_bytes(view, pos)
        value, pos = _read_bytes(view, pos)
        count, pos = read_varint(view, pos)
        headers: list[tuple[str, bytes | None]] = []
        for _h in range(count):
            name, pos = _read_bytes(view, pos)
            hvalue, pos = _read_bytes(view, pos)
            headers.append(((name or b"").decode("utf-8"), hvalue))
        if pos != end:
            raise CorruptRecordError("record length does not match its fields")
        records.append(
            Record(value, key, tuple(headers), header.base_timestamp_ms + ts_delta,
                   header.base_offset + offset_delta)
        )  # fmt: skip
    if pos != len(view):
        raise CorruptRecordError("bytes after the last record")
    return records
