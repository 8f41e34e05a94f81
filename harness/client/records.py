"""The producer's batch encoder: RecordBatch v2 (magic 2) exactly as partition/log/batch.py's
`encode_batch` lays it out (tests/client check the two are byte-identical), but built for the
producer's hot path: records arrive as plain tuples, varints of small values come from a
precomputed table, and each record is one `bytes.join` instead of a varint loop per field. A
profile of `kraftlab bench produce` showed the generic encoder's per-field varint writes as the
largest client cost (docs/benchmarks.md).
"""

from __future__ import annotations

import struct

from partition.log import batch as rb
from partition.log.errors import CorruptRecordError

# (value, key, headers, timestamp_ms)
RecordTuple = tuple[bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...], int]

_HEADER = struct.Struct(">qiibIhiqqqhii")  # the RecordBatch v2 header (batch.py's table)
_CRC = struct.Struct(">I")
_TABLE_MIN = -1
_TABLE_MAX = 1 << 14


def _encode_varint(n: int) -> bytes:
    out = bytearray()
    rb.write_varint(out, n)
    return bytes(out)


_VARINTS = [_encode_varint(n) for n in range(_TABLE_MIN, _TABLE_MAX)]


def varint(n: int) -> bytes:
    if _TABLE_MIN <= n < _TABLE_MAX:
        return _VARINTS[n - _TABLE_MIN]
    return _encode_varint(n)


def _field(data: bytes | None) -> bytes:
    return b"\x01" if data is None else varint(len(data)) + data  # zigzag(-1) = 1: null


def encode_batch(records: list[RecordTuple], producer_id: int = rb.NO_PRODUCER_ID,
                 producer_epoch: int = rb.NO_PRODUCER_EPOCH,
                 base_sequence: int = rb.NO_SEQUENCE) -> bytes:  # fmt: skip
    """One batch (base offset 0, leader epoch -1: the leader patches both)."""
    if not records:
        raise ValueError("a batch needs at least one record")
    table = _VARINTS
    base_ts = records[0][3]
    max_ts = base_ts
    parts: list[bytes] = [bytes(rb.HEADER_SIZE)]
    append = parts.append
    for delta, (value, key, headers, ts) in enumerate(records):
        ts_delta = ts - base_ts
        if ts > max_ts:
            max_ts = ts
        if headers:
            header_part = varint(len(headers)) + b"".join(
                _field(name.encode("utf-8")) + _field(hv) for name, hv in headers)
        else:
            header_part = b"\x00"
        body = b"".join((
            b"\x00",
            table[ts_delta + 1] if -1 <= ts_delta < _TABLE_MAX else _encode_varint(ts_delta),
            table[delta + 1] if delta < _TABLE_MAX - 1 else _encode_varint(delta),
            b"\x01" if key is None else varint(len(key)) + key,
            b"\x01" if value is None else varint(len(value)) + value,
            header_part,
        ))  # fmt: skip
        append(varint(len(body)))
        append(body)
    out = bytearray(b"".join(parts))
    _HEADER.pack_into(out, 0, 0, len(out) - rb.LOG_OVERHEAD, rb.NO_PARTITION_LEADER_EPOCH,
                      rb.MAGIC, 0, 0, len(records) - 1, base_ts, max_ts, producer_id,
                      producer_epoch, base_sequence, len(records))  # fmt: skip
    _CRC.pack_into(out, 17, rb.crc32c(out, rb.CRC_START, len(out)))
    return bytes(out)


# --------------------------------------------------------------------------------- decoding

# (offset, timestamp_ms, key, value, headers)
DecodedRecord = tuple[int, int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]


def _varint_at(buf: bytes, pos: int) -> tuple[int, int]:
    b = buf[pos]
    if b < 0x80:  # one byte: most lengths, deltas and counts of small records
        return (b >> 1) ^ -(b & 1), pos + 1
    return rb.read_varint(buf, pos)


def decode_records(buf: bytes, header: rb.BatchHeader) -> list[DecodedRecord]:
    """The records of one batch whose header `rb.validate`/`iter_headers` returned, as tuples:
    the same values as `partition.log.batch.decode_records` (tests/client check it), with a
    one-byte varint fast path. Raises CorruptRecordError on a malformed record."""
    start = header.position
    end = start + header.size
    if end > len(buf):
        raise CorruptRecordError("batch runs past the buffer")
    data = buf if start == 0 and end == len(buf) else buf[start:end]
    pos = rb.HEADER_SIZE
    size = len(data)
    base_offset = header.base_offset
    base_ts = header.base_timestamp_ms
    out: list[DecodedRecord] = []
    try:
        for _ in range(header.record_count):
            length, pos = _varint_at(data, pos)
            record_end = pos + length
            if length < 0 or record_end > size:
                raise CorruptRecordError("record runs past the batch")
            pos += 1  # attributes
            ts_delta, pos = _varint_at(data, pos)
            offset_delta, pos = _varint_at(data, pos)
            n, pos = _varint_at(data, pos)
            key = None if n < 0 else data[pos:pos + n]
            pos += max(n, 0)
            n, pos = _varint_at(data, pos)
            value = None if n < 0 else data[pos:pos + n]
            pos += max(n, 0)
            count, pos = _varint_at(data, pos)
            headers: tuple[tuple[str, bytes | None], ...] = ()
            if count:
                items = []
                for _h in range(count):
                    n, pos = _varint_at(data, pos)
                    name = b"" if n < 0 else data[pos:pos + n]
                    pos += max(n, 0)
                    n, pos = _varint_at(data, pos)
                    hvalue = None if n < 0 else data[pos:pos + n]
                    pos += max(n, 0)
                    items.append((name.decode("utf-8"), hvalue))
                headers = tuple(items)
            if pos != record_end:
                raise CorruptRecordError("record length does not match its fields")
            out.append((base_offset + offset_delta, base_ts + ts_delta, key, value, headers))
    except IndexError:
        raise CorruptRecordError("record runs past the batch") from None
    if pos != size:
        raise CorruptRecordError("bytes after the last record")
    return out
