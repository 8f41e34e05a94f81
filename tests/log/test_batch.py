"""RecordBatch v2: the byte layout Kafka documents (DefaultRecordBatch / DefaultRecord), field by
field, built by hand with struct; CRC-32C coverage; in-place patching; decode round trips."""

from __future__ import annotations

import struct

import google_crc32c
import pytest
from hypothesis import given
from hypothesis import strategies as st

from partition.log import batch as rb
from partition.log.errors import CorruptRecordError, InvalidRecordError


def varint(n: int) -> bytes:
    """Zigzag + LEB128, written independently of the code under test."""
    u = (n << 1) ^ (n >> 63) if n < 0 else n << 1
    u &= 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while True:
        if u < 0x80:
            out.append(u)
            return bytes(out)
        out.append((u & 0x7F) | 0x80)
        u >>= 7


def test_varint_known_values() -> None:
    # Values from the protobuf/Kafka zigzag tables.
    assert varint(0) == b"\x00" and varint(-1) == b"\x01" and varint(1) == b"\x02"
    assert varint(63) == b"\x7e" and varint(-64) == b"\x7f" and varint(64) == b"\x80\x01"
    for n in (0, -1, 1, 63, -64, 64, 300, -300, 2**31 - 1, -(2**31), 2**62):
        out = bytearray()
        rb.write_varint(out, n)
        assert bytes(out) == varint(n)
        assert rb.read_varint(bytes(out), 0) == (n, len(out))


def test_layout_field_by_field() -> None:
    records = [
        rb.Record(b"value-0", key=b"k0", timestamp_ms=1_700_000_000_000),
        rb.Record(None, key=None, headers=(("h", b"x"), ("n", None)), timestamp_ms=1_700_000_000_007),
    ]
    data = rb.encode_batch(
        records, base_offset=42, partition_leader_epoch=7, producer_id=1234, producer_epoch=3,
        base_sequence=10, is_transactional=True,
    )
    # Records, by hand (DefaultRecord.writeTo).
    r0 = b"\x00" + varint(0) + varint(0) + varint(2) + b"k0" + varint(7) + b"value-0" + varint(0)
    r1 = (b"\x00" + varint(7) + varint(1) + varint(-1) + varint(-1) + varint(2)
          + varint(1) + b"h" + varint(1) + b"x" + varint(1) + b"n" + varint(-1))
    body = varint(len(r0)) + r0 + varint(len(r1)) + r1
    attributes = 0x10  # isTransactional, CreateTime, no compression, not control
    after_crc = struct.pack(">hiqqqhii", attributes, 1, 1_700_000_000_000, 1_700_000_000_007,
                            1234, 3, 10, 2) + body
    crc = google_crc32c.value(after_crc)
    batch_length = 4 + 1 + 4 + len(after_crc)  # leader epoch + magic + crc + rest
    expected = struct.pack(">qiibI", 42, batch_length, 7, 2, crc) + after_crc
    assert data == expected
    # Offsets of each field as Kafka documents them.
    assert struct.unpack_from(">q", data, 0)[0] == 42
    assert struct.unpack_from(">i", data, 8)[0] == len(data) - 12
    assert struct.unpack_from(">i", data, 12)[0] == 7
    assert data[16] == 2
    assert struct.unpack_from(">I", data, 17)[0] == google_crc32c.value(data[21:])
    assert struct.unpack_from(">h", data, 21)[0] == 0x10
    assert struct.unpack_from(">i", data, 23)[0] == 1
    assert struct.unpack_from(">qq", data, 27) == (1_700_000_000_000, 1_700_000_000_007)
    assert struct.unpack_from(">qhii", data, 43) == (1234, 3, 10, 2)
    assert data[61:] == body


def test_attribute_bits_and_header_view() -> None:
    data = rb.encode_batch([rb.Record(b"x")], is_control=True, log_append_time=True)
    h = rb.read_header(data)
    assert h.attributes == 0x20 | 0x08 and h.is_control and not h.is_transactional
    assert h.size == len(data) and h.record_count == 1 and h.last_offset_delta == 0
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (-1, -1, -1)


def test_header_view_does_not_touch_records() -> None:
    data = bytearray(rb.encode_batch([rb.Record(b"a" * 100) for _ in range(3)]))
    data[70] ^= 0xFF  # garbage inside the records
    h = rb.read_header(data)
    assert h.record_count == 3 and h.size == len(data)
    with pytest.raises(CorruptRecordError, match="CRC"):
        rb.validate(data)


def test_crc_mismatch_detected_for_every_covered_byte() -> None:
    data = rb.encode_batch([rb.Record(b"payload", key=b"k", timestamp_ms=5)] * 2)
    rb.validate(data)
    for i in range(rb.CRC_START, len(data)):
        bad = bytearray(data)
        bad[i] ^= 0x01
        with pytest.raises(CorruptRecordError):
            rb.validate(bad)


def test_bad_magic_torn_and_compressed() -> None:
    data = bytearray(rb.encode_batch([rb.Record(b"v")]))
    with pytest.raises(CorruptRecordError, match="torn"):
        rb.validate(data[:-1])
    with pytest.raises(CorruptRecordError, match="torn batch header"):
        rb.validate(data[:60])
    bad = bytearray(data)
    bad[16] = 1
    with pytest.raises(CorruptRecordError, match="magic"):
        rb.validate(bad)
    compressed = bytearray(data)
    struct.pack_into(">h", compressed, 21, 1)  # gzip
    struct.pack_into(">I", compressed, 17, google_crc32c.value(bytes(compressed[21:])))
    with pytest.raises(InvalidRecordError, match="compress"):
        rb.validate(compressed)


def test_patch_keeps_crc_valid() -> None:
    data = bytearray(rb.encode_batch([rb.Record(b"v")] * 4))
    crc_before = bytes(data[17:21])
    rb.patch(data, 0, 1_000_000, 99)
    h = rb.validate(data)
    assert (h.base_offset, h.partition_leader_epoch, h.last_offset) == (1_000_000, 99, 1_000_003)
    assert bytes(data[17:21]) == crc_before
    prefix = rb.patched_prefix(rb.read_header(data), 5, 6)
    assert rb.validate(prefix + bytes(data[16:])).base_offset == 5


records_strategy = st.lists(
    st.builds(
        rb.Record,
        value=st.none() | st.binary(max_size=40),
        key=st.none() | st.binary(max_size=10),
        headers=st.lists(st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=5)), max_size=3).map(tuple),
        timestamp_ms=st.integers(0, 2**40),
    ),
    min_size=1,
    max_size=8,
)


@given(records_strategy, st.integers(0, 2**40), st.integers(-1, 2**31 - 1))
def test_decode_round_trip(records: list[rb.Record], base_offset: int, epoch: int) -> None:
    data = rb.encode_batch(records, base_offset=base_offset, partition_leader_epoch=epoch)
    h = rb.validate(data)
    decoded = rb.decode_records(data, h)
    assert [(r.value, r.key, r.headers, r.timestamp_ms) for r in decoded] == [
        (r.value, r.key, r.headers, r.timestamp_ms) for r in records
    ]
    assert [r.offset for r in decoded] == list(range(base_offset, base_offset + len(records)))
    assert h.max_timestamp_ms == max(r.timestamp_ms for r in records)


def test_iter_headers_over_several_batches() -> None:
    a = rb.encode_batch([rb.Record(b"a")] * 2, base_offset=0)
    b = rb.encode_batch([rb.Record(b"b")] * 3, base_offset=2)
    headers = list(rb.iter_headers(a + b))
    assert [(h.position, h.base_offset, h.last_offset) for h in headers] == [(0, 0, 1), (len(a), 2, 4)]
    with pytest.raises(CorruptRecordError):
        list(rb.iter_headers(a + b[:-3]))


def _with_fields(data: bytes, **fields: int) -> bytes:
    """`data` with header fields overwritten (offsets 12/16/21/23/57) and the CRC recomputed."""
    out = bytearray(data)
    layout = {"magic": (">b", 16), "attributes": (">h", 21), "last_offset_delta": (">i", 23),
              "record_count": (">i", 57)}  # fmt: skip
    for name, value in fields.items():
        fmt, at = layout[name]
        struct.pack_into(fmt, out, at, value)
    struct.pack_into(">I", out, 17, google_crc32c.value(bytes(out[21:])))
    return bytes(out)


def _one_batch_variants() -> list[bytes]:
    """One batch, and ways for a buffer to be more, less or other than one good batch."""
    small = rb.encode_batch([rb.Record(b"v", timestamp_ms=3)] * 3)
    large = rb.encode_batch([rb.Record(bytes(100), timestamp_ms=3)] * 40)  # CRC over a view
    out = []
    for good in (small, large):
        flipped = bytearray(good)
        flipped[-1] ^= 1
        out += [good, good + good, good[:-1], good[:60], b"", bytes(flipped), good + b"\0",
                _with_fields(good, magic=1), _with_fields(good, attributes=1),
                _with_fields(good, record_count=0), _with_fields(good, record_count=4000),
                _with_fields(good, record_count=-1), _with_fields(good, last_offset_delta=-1),
                _with_fields(good, last_offset_delta=-1, record_count=0)]  # fmt: skip
    return out


@pytest.mark.parametrize("buf_type", [bytes, bytearray, memoryview])
def test_validate_one_accepts_only_one_batch_that_validate_accepts(buf_type: type) -> None:
    """The leader's fast check never lets through what the general path would refuse, and gives
    the same fields; what it declines (several batches, any bad one) goes to the general path."""
    accepted = 0
    for data in _one_batch_variants():
        buf = buf_type(data) if buf_type is not memoryview else memoryview(bytearray(data))
        fields = rb.validate_one(buf, True)
        if fields is None:
            continue
        accepted += 1
        assert fields == rb.validate_fields(buf)
        assert fields[1] + rb.LOG_OVERHEAD == len(data)
        assert fields[12] > 0
    assert accepted == 2  # the two good batches, and nothing else
    flipped = bytearray(_one_batch_variants()[0])
    flipped[-1] ^= 1  # a bad CRC passes only when the caller says it checked the CRC already
    assert rb.validate_one(bytes(flipped), False) == rb.validate_fields(bytes(flipped), check_crc=False)


@given(
    st.lists(st.binary(max_size=300), min_size=1, max_size=40),
    st.integers(0, 2**40),
    st.integers(-1, 2**31 - 1),
    st.booleans(),
)
def test_values_batch_is_the_records_batch(
    values: list[bytes], base_offset: int, epoch: int, is_control: bool
) -> None:
    expected = rb.encode_batch([rb.Record(v) for v in values], base_offset=base_offset,
                               partition_leader_epoch=epoch, is_control=is_control)  # fmt: skip
    got = rb.encode_values_batch(values, base_offset=base_offset, partition_leader_epoch=epoch,
                                 is_control=is_control)  # fmt: skip
    assert got == expected
    header = rb.validate(got)
    assert [r.value for r in rb.decode_records(got, header)] == values


def test_values_batch_past_the_varint_table() -> None:
    # offset deltas, a value length and a record length beyond the precomputed varints
    values = [b""] * 17_000 + [b"v" * 20_000]
    assert rb.encode_values_batch(values, base_offset=5) == rb.encode_batch(
        [rb.Record(v) for v in values], base_offset=5
    )


def test_values_batch_needs_a_value() -> None:
    with pytest.raises(InvalidRecordError):
        rb.encode_values_batch([])
