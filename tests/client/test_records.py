"""The producer's fast batch encoder writes exactly the bytes of the log's reference encoder
(partition/log/batch.py), so brokers validate, store and serve them unchanged."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.client.records import decode_records, encode_batch, varint
from partition.log import batch as rb

maybe_bytes = st.none() | st.binary(max_size=300)
headers = st.lists(st.tuples(st.text(max_size=8), maybe_bytes), max_size=3).map(tuple)
records = st.lists(
    st.tuples(maybe_bytes, maybe_bytes, headers, st.integers(0, 2**41)), min_size=1, max_size=40
)


@settings(max_examples=200, deadline=None)
@given(records, st.integers(-1, 2**40), st.integers(-1, 2**15 - 1), st.integers(-1, 2**31 - 1))
def test_fast_encoder_is_byte_identical_to_the_log_encoder(
    recs: list[tuple[bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...], int]],
    producer_id: int, producer_epoch: int, base_sequence: int,
) -> None:
    reference = rb.encode_batch(
        [rb.Record(value, key, hdrs, ts) for value, key, hdrs, ts in recs],
        producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=base_sequence)
    fast = encode_batch(recs, producer_id, producer_epoch, base_sequence)
    assert fast == reference
    header = rb.validate(fast)
    assert header.record_count == len(recs)
    decoded = rb.decode_records(fast, header)
    assert [(r.value, r.key, r.headers, r.timestamp_ms) for r in decoded] == [
        (v, k, h, ts) for v, k, h, ts in recs]


# The encoder's fast path: no key, no headers, timestamps within the varint table of the first
# (what a producer sends), values on both sides of the table's edge (16,383 / 16,384 bytes).
plain_records = st.integers(1_700_000_000_000, 2**41).flatmap(lambda base: st.lists(
    st.tuples(st.binary(max_size=300) | st.sampled_from([b"v" * 16383, b"w" * 16384, b"" ]),
              st.just(None), st.just(()), st.integers(base - 1, base + 20_000)),
    min_size=1, max_size=40))  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(plain_records, st.integers(-1, 2**40))
def test_fast_path_of_plain_records_is_byte_identical_to_the_log_encoder(
    recs: list[tuple[bytes, None, tuple[()], int]], producer_id: int,
) -> None:
    reference = rb.encode_batch([rb.Record(v, k, h, ts) for v, k, h, ts in recs],
                                producer_id=producer_id, producer_epoch=0 if producer_id >= 0 else -1,
                                base_sequence=0 if producer_id >= 0 else -1)  # fmt: skip
    fast = encode_batch(recs, producer_id, 0 if producer_id >= 0 else -1,
                        0 if producer_id >= 0 else -1)  # fmt: skip
    assert fast == reference


def test_varint_table_edges_match_the_reference() -> None:
    for n in (-2, -1, 0, 1, 63, 64, 8191, 8192, 16383, 16384, 2**31, -(2**31)):
        out = bytearray()
        rb.write_varint(out, n)
        assert varint(n) == bytes(out), n


@settings(max_examples=200, deadline=None)
@given(records, st.binary(max_size=20))
def test_fast_decoder_reads_what_the_log_decoder_reads(
    recs: list[tuple[bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...], int]],
    prefix: bytes,
) -> None:
    data = rb.encode_batch([rb.Record(value, key, hdrs, ts) for value, key, hdrs, ts in recs])
    header = rb.validate(data)
    reference = [(r.offset, r.timestamp_ms, r.key, r.value, r.headers)
                 for r in rb.decode_records(data, header)]
    assert decode_records(data, header) == reference
    shifted = prefix + data  # a batch inside a larger fetch response
    assert decode_records(shifted, rb.read_header(shifted, len(prefix))) == reference


def test_fast_decoder_rejects_a_torn_record() -> None:
    data = bytearray(rb.encode_batch([rb.Record(b"value")]))
    data[rb.HEADER_SIZE] = 0x7E  # record length 63: past the end of the batch
    with pytest.raises(rb.CorruptRecordError):
        decode_records(bytes(data), rb.read_header(data))
