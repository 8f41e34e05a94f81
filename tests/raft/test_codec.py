"""quorum.codec: every Raft message round-trips; malformed input is a DecodeError, never anything
else (a bad frame is a DecodeError at the edge)."""

from __future__ import annotations

import contextlib
import enum
from dataclasses import dataclass

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quorum import codec
from quorum.raft.log import Entry, OffsetAndEpoch
from quorum.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    ErrorCode,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    LeaderChangeRecord,
    NoOpRecord,
    VoteRequest,
    VoteResponse,
)

SAMPLES = [
    VoteRequest(3, 1, 2, 10, pre_vote=True),
    VoteResponse(ErrorCode.FENCED_LEADER_EPOCH, None, 4, False, 3, True),
    BeginQuorumEpochRequest(5, 2),
    BeginQuorumEpochResponse(ErrorCode.NONE, 2, 5),
    EndQuorumEpochRequest(5, 2, (3, 1)),
    EndQuorumEpochResponse(ErrorCode.NONE, None, 5),
    FetchRequest(101, 5, 42, 4, 500, 1024, read_round=7),
    FetchResponse(
        ErrorCode.NONE,
        2,
        5,
        42,
        40,
        0,
        (Entry(42, 5, b"x"), Entry(43, 5, b"\x00\xff", control=True)),
        read_round=7,
    ),
    FetchResponse(ErrorCode.NONE, 2, 5, 42, 40, 0, diverging_epoch=OffsetAndEpoch(30, 3)),
    FetchResponse(ErrorCode.NONE, 2, 5, 0, 40, 100, snapshot_id=OffsetAndEpoch(100, 4)),
    FetchSnapshotRequest(3, 5, OffsetAndEpoch(100, 4), 4096, 4096),
    FetchSnapshotResponse(ErrorCode.NONE, 2, 5, OffsetAndEpoch(100, 4), 0, 9000, b"abc"),
    LeaderChangeRecord(2, 5, (1, 2, 3), (2, 3)),
    NoOpRecord(),
]


@pytest.mark.parametrize("message", SAMPLES, ids=lambda m: type(m).__name__)
def test_round_trip(message: object) -> None:
    decoded = codec.decode(codec.encode(message))
    assert decoded == message
    assert type(decoded) is type(message)


def test_enum_field_decodes_to_enum_with_retriable() -> None:
    decoded = codec.decode(codec.encode(SAMPLES[1]), VoteResponse)
    assert decoded.error is ErrorCode.FENCED_LEADER_EPOCH
    assert decoded.error.retriable
    assert not ErrorCode.INCONSISTENT_VOTER_SET.retriable


def _frame(tag: str, *values: object) -> bytes:
    payload = msgpack.packb((tag, *values), use_bin_type=True)
    return msgpack.packb(msgpack.ExtType(1, payload), use_bin_type=True)


@pytest.mark.parametrize(
    ("frame", "fragment"),
    [
        (_frame("raft.BeginQuorumEpochRequest", "five", 2), "field leader_epoch"),
        (_frame("raft.BeginQuorumEpochRequest", True, 2), "field leader_epoch"),
        (_frame("raft.BeginQuorumEpochRequest", 5), "missing field(s) leader_id"),
        (_frame("raft.BeginQuorumEpochRequest", 5, 2, 9), "unknown field"),
        (_frame("raft.NoSuchThing", 1), "unknown record tag"),
        (_frame("raft.BeginQuorumEpochResponse", 12345, None, 1), "field error"),
        (_frame("raft.EndQuorumEpochRequest", 1, 2, [3, "x"]), "field preferred_successors"),
        (msgpack.packb(msgpack.ExtType(9, b"")), "ext code"),
        (
            _frame("raft.FetchResponse", 0, 1, 2, 3, 4, 5, (("raft.NoOpRecord",),)),
            "expected raft.Entry",
        ),
        (msgpack.packb([1, 2]), "registered record"),
        (b"", "malformed"),
        (b"\xc1", "malformed"),
        (codec.encode(NoOpRecord()) + b"\x00", "malformed"),
    ],
)
def test_malformed_input_is_a_decode_error(frame: bytes, fragment: str) -> None:
    with pytest.raises(codec.DecodeError) as info:
        codec.decode(frame)
    assert fragment in str(info.value)


def test_older_sender_without_trailing_defaults_is_accepted() -> None:
    # FetchRequest grew read_round (default 0): a frame without it still decodes.
    frame = _frame("raft.FetchRequest", 1, 2, 3, 1, 500, 100)
    assert codec.decode(frame) == FetchRequest(1, 2, 3, 1, 500, 100, 0)


def test_expected_type_is_enforced() -> None:
    with pytest.raises(codec.DecodeError):
        codec.decode(codec.encode(NoOpRecord()), VoteRequest)


def test_unregistered_class_cannot_be_encoded() -> None:
    @dataclass(frozen=True)
    class Stranger:
        x: int

    with pytest.raises(codec.EncodeError):
        codec.encode(Stranger(1))


def test_tag_cannot_be_reused() -> None:
    @dataclass(frozen=True)
    class Impostor:
        x: int

    with pytest.raises(ValueError, match="already registered"):
        codec.register("raft.VoteRequest")(Impostor)


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


@codec.register("test.Painted")
@dataclass(frozen=True, slots=True)
class Painted:
    color: Color
    inner: OffsetAndEpoch | None
    tags: dict[str, int]
    weight: float = 1.0


def test_plain_enum_nested_dataclass_and_dict() -> None:
    value = Painted(Color.BLUE, OffsetAndEpoch(3, 1), {"a": 1})
    assert codec.decode(codec.encode(value)) == value
    bad = _frame("test.Painted", "green", None, {})
    with pytest.raises(codec.DecodeError, match="field color"):
        codec.decode(bad)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_only_ever_raise_decode_error(data: bytes) -> None:
    with contextlib.suppress(codec.DecodeError):
        codec.decode(data)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(SAMPLES), st.data())
def test_corrupted_frames_only_ever_raise_decode_error(
    message: object, data: st.DataObject
) -> None:
    frame = bytearray(codec.encode(message))
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(frame) - 1))
        frame[i] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(frame)))
    with contextlib.suppress(codec.DecodeError):
        codec.decode(bytes(frame[:cut]))


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 2**40), st.integers(0, 2**20), st.binary(max_size=64), st.booleans()
        ),
        max_size=20,
    ),
    st.integers(0, 2**40),
)
def test_fetch_response_round_trip_property(
    rows: list[tuple[int, int, bytes, bool]], hw: int
) -> None:
    records = tuple(Entry(o, e, d, c) for o, e, d, c in rows)
    message = FetchResponse(ErrorCode.NONE, 1, 2, 3, hw, 0, records)
    assert codec.decode(codec.encode(message)) == message
