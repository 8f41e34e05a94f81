"""The `__consumer_offsets` record formats, byte for byte as Kafka's schemas lay them out
(group-coordinator/src/main/resources/common/message/*.json): what we write (OffsetCommitKey v1,
OffsetCommitValue v3, GroupMetadataKey v2, GroupMetadataValue v3), every value version we read
(0-4, 4 being flexible), tombstones, and record types we skip."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coordinator.errors import CoordinatorRecordError
from coordinator.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_key,
    decode_value,
    group_metadata_record,
    group_metadata_tombstone,
    offset_commit_record,
    offset_commit_tombstone,
)


def s16(s: str | None) -> bytes:
    """A non-flexible (nullable) string: int16 length + UTF-8."""
    if s is None:
        return struct.pack(">h", -1)
    return struct.pack(">h", len(s.encode())) + s.encode()


def b32(b: bytes) -> bytes:
    return struct.pack(">i", len(b)) + b


def compact(s: str | None) -> bytes:
    """A flexible (compact) string: unsigned varint length+1 (0 = null); lengths here < 127."""
    if s is None:
        return b"\x00"
    return bytes([len(s.encode()) + 1]) + s.encode()


def test_offset_commit_record_bytes() -> None:
    record = offset_commit_record(OffsetCommitKey("g", "orders", 3),
                                  OffsetCommitValue(42, "meta", 1_700_000_000_000, leader_epoch=7))  # fmt: skip
    assert record.key == struct.pack(">h", 1) + s16("g") + s16("orders") + struct.pack(">i", 3)
    assert record.value == (struct.pack(">hqi", 3, 42, 7) + s16("meta")
                            + struct.pack(">q", 1_700_000_000_000))  # fmt: skip


def test_group_metadata_record_bytes() -> None:
    member = MemberMetadata("c-1", "inst", "client", "/127.0.0.1", 60_000, 45_000, b"sub", b"asg")
    value = GroupMetadataValue("consumer", 5, "range", "c-1", 1_000, (member,))
    record = group_metadata_record(GroupMetadataKey("g"), value)
    assert record.key == struct.pack(">h", 2) + s16("g")
    assert record.value == (
        struct.pack(">h", 3) + s16("consumer") + struct.pack(">i", 5) + s16("range") + s16("c-1")
        + struct.pack(">q", 1_000) + struct.pack(">i", 1)
        + s16("c-1") + s16("inst") + s16("client") + s16("/127.0.0.1")
        + struct.pack(">ii", 60_000, 45_000) + b32(b"sub") + b32(b"asg")
    )  # fmt: skip


def test_empty_group_writes_null_protocol_and_leader() -> None:
    value = GroupMetadataValue("consumer", 6, None, None, 2_000, ())
    record = group_metadata_record(GroupMetadataKey("g"), value)
    assert record.value == (struct.pack(">h", 3) + s16("consumer") + struct.pack(">i", 6)
                            + s16(None) + s16(None) + struct.pack(">qi", 2_000, 0))  # fmt: skip
    key = decode_key(record.key)
    assert key == GroupMetadataKey("g")
    assert decode_value(key, record.value) == value


def test_tombstones_have_no_value() -> None:
    assert offset_commit_tombstone(OffsetCommitKey("g", "t", 0)).value is None
    assert group_metadata_tombstone(GroupMetadataKey("g")).value is None
    assert decode_value(GroupMetadataKey("g"), None) is None


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        # v0: offset, metadata, commitTimestamp
        (struct.pack(">hq", 0, 10) + s16("m") + struct.pack(">q", 5),
         OffsetCommitValue(10, "m", 5)),
        # v1: + expireTimestamp
        (struct.pack(">hq", 1, 10) + s16("m") + struct.pack(">qq", 5, 99),
         OffsetCommitValue(10, "m", 5, expire_timestamp_ms=99)),
        # v2: as v0
        (struct.pack(">hq", 2, 10) + s16("") + struct.pack(">q", 5),
         OffsetCommitValue(10, "", 5)),
        # v4: flexible, with an unknown tagged field (tag 3, 2 bytes) that must be skipped
        (struct.pack(">hqi", 4, 10, 3) + compact("m") + struct.pack(">q", 5) + b"\x01\x03\x02ab",
         OffsetCommitValue(10, "m", 5, leader_epoch=3)),
    ],
)  # fmt: skip
def test_reads_every_offset_value_version(raw: bytes, expected: OffsetCommitValue) -> None:
    assert decode_value(OffsetCommitKey("g", "t", 0), raw) == expected


def test_reads_old_and_flexible_group_values() -> None:
    key = GroupMetadataKey("g")
    # v0: no rebalance timeout (-1: the loader uses the session timeout), no timestamp, no
    # group.instance.id.
    v0 = (struct.pack(">h", 0) + s16("consumer") + struct.pack(">i", 1) + s16("range") + s16("m")
          + struct.pack(">i", 1) + s16("m") + s16("cid") + s16("host") + struct.pack(">i", 10_000)
          + b32(b"s") + b32(b"a"))  # fmt: skip
    assert decode_value(key, v0) == GroupMetadataValue(
        "consumer",
        1,
        "range",
        "m",
        -1,
        (MemberMetadata("m", None, "cid", "host", -1, 10_000, b"s", b"a"),),
    )
    # v4: compact strings/bytes/arrays, tagged fields after each struct.
    v4 = (struct.pack(">h", 4) + compact("consumer") + struct.pack(">i", 2) + compact("range")
          + compact(None) + struct.pack(">q", 7) + b"\x02"  # one member
          + compact("m") + compact("i") + compact("cid") + compact("host")
          + struct.pack(">ii", 20_000, 10_000) + b"\x02s" + b"\x02a" + b"\x00"  # member tags
          + b"\x00")  # fmt: skip
    assert decode_value(key, v4) == GroupMetadataValue(
        "consumer",
        2,
        "range",
        None,
        7,
        (MemberMetadata("m", "i", "cid", "host", 20_000, 10_000, b"s", b"a"),),
    )


def test_offset_key_v0_reads_like_v1() -> None:
    raw = struct.pack(">h", 0) + s16("g") + s16("t") + struct.pack(">i", 9)
    assert decode_key(raw) == OffsetCommitKey("g", "t", 9)


def test_unknown_record_types_are_not_ours() -> None:
    # Key version 3 is ConsumerGroupMetadataKey (KIP-848): skipped by the loader.
    assert decode_key(struct.pack(">h", 3) + s16("g")) is None


@pytest.mark.parametrize(
    "raw",
    [
        struct.pack(">h", 1) + s16("g"),  # truncated key
        struct.pack(">h", 2) + s16("g") + b"x",  # trailing bytes
        struct.pack(">h", 2) + struct.pack(">h", -1),  # null group
        struct.pack(">h", 2) + struct.pack(">h", 2) + b"\xff\xfe",  # not UTF-8
    ],
)
def test_corrupt_keys_raise(raw: bytes) -> None:
    with pytest.raises(CoordinatorRecordError):
        decode_key(raw)


def test_corrupt_or_future_values_raise() -> None:
    key = OffsetCommitKey("g", "t", 0)
    with pytest.raises(CoordinatorRecordError):
        decode_value(key, struct.pack(">hq", 5, 1) + s16("") + struct.pack(">q", 0))  # v5
    with pytest.raises(CoordinatorRecordError):
        decode_value(key, struct.pack(">hq", 3, 1))  # truncated
    with pytest.raises(CoordinatorRecordError):
        decode_value(GroupMetadataKey("g"), struct.pack(">h", 3) + s16("c") + struct.pack(">i", 1)
                     + s16(None) + s16(None) + struct.pack(">qi", 0, -1))  # null array  # fmt: skip


names = st.text(max_size=20)
nullable = st.none() | names


@given(names, names, st.integers(0, 2**31 - 1), st.integers(-1, 2**62), names,
       st.integers(0, 2**62), st.integers(-1, 2**31 - 1))  # fmt: skip
def test_offset_records_round_trip(group: str, topic: str, partition: int, offset: int,
                                   metadata: str, ts: int, epoch: int) -> None:  # fmt: skip
    key, value = (
        OffsetCommitKey(group, topic, partition),
        OffsetCommitValue(offset, metadata, ts, epoch),
    )
    record = offset_commit_record(key, value)
    decoded = decode_key(record.key)
    assert decoded == key
    assert decode_value(decoded, record.value) == value


members = st.builds(MemberMetadata, names, nullable, names, names, st.integers(-1, 10**6),
                    st.integers(0, 10**6), st.binary(max_size=20), st.binary(max_size=20))  # fmt: skip


@given(names, names, st.integers(0, 10**6), nullable, nullable, st.integers(-1, 2**62),
       st.lists(members, max_size=4))  # fmt: skip
def test_group_records_round_trip(group: str, ptype: str, generation: int, protocol: str | None,
                                  leader: str | None, ts: int, ms: list[MemberMetadata]) -> None:  # fmt: skip
    value = GroupMetadataValue(ptype, generation, protocol, leader, ts, tuple(ms))
    record = group_metadata_record(GroupMetadataKey(group), value)
    decoded = decode_key(record.key)
    assert decoded == GroupMetadataKey(group)
    assert decode_value(decoded, record.value) == value
