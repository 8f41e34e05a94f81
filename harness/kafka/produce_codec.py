"""Produce on the Kafka wire without per-field objects: the request header, ProduceRequest v3-v10
and ProduceResponse v3-v10, decoded and encoded by hand (Kafka's ProduceRequest.json /
ProduceResponse.json; flexible versions 9+ use compact lengths and tagged fields, KIP-482).

Produce is the hot request of a Kafka producer: kafka-python's generic codec (harness/kafka/
server.py uses it for every other API) builds a data object per topic and per partition and copies
the records twice. Here a request is one pass over the frame; each partition's records are one
`bytes` slice of it (the RecordBatch bytes the client sent, handed to the log untouched), and the
answer is one `bytearray` written in one pass.

Invariants:
- Byte-for-byte the same as kafka-python's codec on everything both accept (checked by
  tests/kafka/test_produce_codec.py against kafka-python for every version).
- `decode_produce` is strict: a short buffer, a trailing byte, a negative count or bad UTF-8
  raises `ValueError`, and the caller falls back to kafka-python's decoder, so what is refused
  (and how: the connection is closed) stays what kafka-python refuses.
- Tagged fields a client sends in a request are skipped (Kafka ignores unknown tags).
"""

from __future__ import annotations

import struct
from typing import Any, NamedTuple

PRODUCE_KEY = 0
MIN_VERSION, MAX_VERSION = 3, 10
FLEXIBLE_FROM = 9  # "flexibleVersions": "9+"

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_HEADER = struct.Struct(">hhi")  # api_key, api_version, correlation_id
_ACKS_TIMEOUT = struct.Struct(">hi")
_PART_V3 = struct.Struct(">ihqq")  # index, error_code, base_offset, log_append_time_ms
_PART_V5 = struct.Struct(">ihqqq")  # ... log_start_offset (v5+)
_TWO_I32 = struct.Struct(">ii")


class RequestHeader(NamedTuple):
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body_offset: int  # where the request body starts in the frame


class PartitionData(NamedTuple):
    index: int
    records: bytes | None


class TopicData(NamedTuple):
    name: str
    partition_data: list[PartitionData]


class ProduceData(NamedTuple):
    """A decoded ProduceRequest; kafka-python's decoded request has the same attribute names."""

    transactional_id: str | None
    acks: int
    timeout_ms: int
    topic_data: list[TopicData]


# --- reading ------------------------------------------------------------------------------------


def _uvarint(buf: Any, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise ValueError("varint too long")


def _skip_tags(buf: Any, pos: int) -> int:
    count, pos = _uvarint(buf, pos)
    for _ in range(count):
        _, pos = _uvarint(buf, pos)  # tag
        size, pos = _uvarint(buf, pos)
        pos += size
        if pos > len(buf):
            raise ValueError("tagged field past the end")
    return pos


def _string(buf: Any, pos: int, compact: bool) -> tuple[str | None, int]:
    if compact:
        n, pos = _uvarint(buf, pos)
        n -= 1
    else:
        (n,) = _I16.unpack_from(buf, pos)
        pos += 2
    if n < 0:
        return None, pos
    end = pos + n
    if end > len(buf):
        raise ValueError("string past the end")
    return str(buf[pos:end], "utf-8"), end


def decode_header(buf: Any, flexible: bool) -> RequestHeader:
    """Request header v1 (v2 when `flexible`: the same plus tagged fields). The client id is a
    non-compact nullable string in both (Kafka's RequestHeader.json)."""
    api_key, api_version, correlation_id = _HEADER.unpack_from(buf, 0)
    client_id, pos = _string(buf, 8, compact=False)
    if flexible:
        pos = _skip_tags(buf, pos)
    return RequestHeader(api_key, api_version, correlation_id, client_id, pos)


def decode_produce(buf: Any, pos: int, version: int) -> ProduceData:
    """The ProduceRequest body at `pos` of `buf` (bytes or memoryview); ValueError (or
    struct.error / IndexError, both caught as decode failures) on anything malformed."""
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise ValueError(f"Produce v{version} is not decoded here")
    flexible = version >= FLEXIBLE_FROM
    size = len(buf)
    transactional_id, pos = _string(buf, pos, flexible)
    acks, timeout_ms = _ACKS_TIMEOUT.unpack_from(buf, pos)
    pos += 6
    topics: list[TopicData] = []
    n_topics, pos = _count(buf, pos, flexible)
    for _ in range(n_topics):
        name, pos = _string(buf, pos, flexible)
        if name is None:
            raise ValueError("null topic name")
        parts: list[PartitionData] = []
        n_parts, pos = _count(buf, pos, flexible)
        for _ in range(n_parts):
            (index,) = _I32.unpack_from(buf, pos)
            pos += 4
            if flexible:
                n, pos = _uvarint(buf, pos)
                n -= 1
            else:
                (n,) = _I32.unpack_from(buf, pos)
                pos += 4
            records = None
            if n >= 0:
                end = pos + n
                if end > size:
                    raise ValueError("records past the end")
                records = bytes(buf[pos:end])  # the one copy: the batch as the client sent it
                pos = end
            if flexible:
                pos = _skip_tags(buf, pos)
            parts.append(PartitionData(index, records))
        if flexible:
            pos = _skip_tags(buf, pos)
        topics.append(TopicData(name, parts))
    if flexible:
        pos = _skip_tags(buf, pos)
    if pos != size:
        raise ValueError(f"{size - pos} trailing bytes")
    return ProduceData(transactional_id, acks, timeout_ms, topics)


def _count(buf: Any, pos: int, flexible: bool) -> tuple[int, int]:
    if flexible:
        n, pos = _uvarint(buf, pos)
        n -= 1
    else:
        (n,) = _I32.unpack_from(buf, pos)
        pos += 4
    if n < 0:
        raise ValueError("null array")
    return n, pos


# --- writing ------------------------------------------------------------------------------------


class PartitionAnswer(NamedTuple):
    index: int
    error_code: int
    base_offset: int
    log_start_offset: int
    error_message: str | None
    current_leader: tuple[int, int] | None  # (leader_id, leader_epoch): KIP-951 hint, v10+


class NodeEndpoint(NamedTuple):
    node_id: int
    host: str
    port: int
    rack: str | None


def _put_uvarint(out: bytearray, value: int) -> None:
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _put_string(out: bytearray, value: str | None, compact: bool) -> None:
    if value is None:
        if compact:
            out.append(0)
        else:
            out += b"\xff\xff"
        return
    data = value.encode("utf-8")
    if compact:
        _put_uvarint(out, len(data) + 1)
    else:
        out += _I16.pack(len(data))
    out += data


class ProduceAnswer:
    """A ProduceResponse to encode; the same two calls as a kafka-python response object
    (`with_header`, then `encode(header=True, framed=True)`), so server.py frames both alike."""

    __slots__ = ("correlation_id", "node_endpoints", "responses", "version")

    def __init__(self, version: int, responses: list[tuple[str, list[PartitionAnswer]]],
                 node_endpoints: list[NodeEndpoint] | None = None) -> None:  # fmt: skip
        self.version = version
        self.responses = responses
        self.node_endpoints = node_endpoints or []
        self.correlation_id = 0

    def with_header(self, correlation_id: int) -> None:
        self.correlation_id = correlation_id

    def encode(self, header: bool = True, framed: bool = True) -> bytearray:
        version = self.version
        flexible = version >= FLEXIBLE_FROM
        out = bytearray(b"\0\0\0\0") if framed else bytearray()
        if header:
            out += _I32.pack(self.correlation_id)
            if flexible:
                out.append(0)  # response header v1: no tagged fields
        _put_count(out, len(self.responses), flexible)
        for name, parts in self.responses:
            _put_string(out, name, flexible)
            _put_count(out, len(parts), flexible)
            for p in parts:
                _put_partition(out, p, version, flexible)
            if flexible:
                out.append(0)
        out += _I32.pack(0)  # throttle_time_ms
        if flexible:
            if version >= 10 and self.node_endpoints:
                body = bytearray()
                _put_count(body, len(self.node_endpoints), True)
                for e in self.node_endpoints:
                    body += _I32.pack(e.node_id)
                    _put_string(body, e.host, True)
                    body += _I32.pack(e.port)
                    _put_string(body, e.rack, True)
                    body.append(0)
                out += b"\x01\x00"  # one tagged field, tag 0: NodeEndpoints
                _put_uvarint(out, len(body))
                out += body
            else:
                out.append(0)
        if framed:
            _I32.pack_into(out, 0, len(out) - 4)
        return out


def _put_count(out: bytearray, n: int, flexible: bool) -> None:
    if flexible:
        _put_uvarint(out, n + 1)
    else:
        out += _I32.pack(n)


def _put_partition(out: bytearray, p: PartitionAnswer, version: int, flexible: bool) -> None:
    if version >= 5:
        out += _PART_V5.pack(p.index, p.error_code, p.base_offset, -1, p.log_start_offset)
    else:
        out += _PART_V3.pack(p.index, p.error_code, p.base_offset, -1)
    if version >= 8:
        _put_count(out, 0, flexible)  # record_errors: none (whole batches only)
        _put_string(out, p.error_message, flexible)
    if flexible:
        if version >= 10 and p.current_leader is not None:
            out += b"\x01\x00\x09"  # one tagged field, tag 0: CurrentLeader, 9 bytes
            out += _TWO_I32.pack(*p.current_leader)
            out.append(0)
        else:
            out.append(0)
