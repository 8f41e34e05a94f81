"""quorum.codec's fast paths give exactly what the plain msgpack calls give: `encode` writes the
record ext's header itself (with a reused packer) and must produce the bytes of
packb(ExtType(1, packb([tag, fields...]))); `decode` unpacks a whole-frame record ext's payload
directly and must accept, reject and build exactly as unpacking the frame through the ext hook."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import harness.net.client  # noqa: F401 - registers the client.* frames
import quorum.metadata.records  # noqa: F401 - registers the metadata.* records
from quorum import codec
from quorum.raft.log import Entry, OffsetAndEpoch
from quorum.raft.messages import ErrorCode, FetchResponse
from tests.raft.test_codec import SAMPLES


def reference_encode(obj: Any) -> bytes:
    spec = codec._BY_CLASS[type(obj)]
    payload = msgpack.packb((spec.tag, *spec.getter(obj)), default=codec._default,
                            use_bin_type=True)  # fmt: skip
    return msgpack.packb(msgpack.ExtType(1, payload))  # type: ignore[no-any-return]


def reference_decode(data: bytes) -> Any:
    """The general path: one unpackb of the frame, the record built in the ext hook."""
    try:
        obj = msgpack.unpackb(data, ext_hook=codec._ext_hook, use_list=False, raw=False)
    except codec.DecodeError:
        raise
    except Exception as exc:
        raise codec.DecodeError(str(exc)) from exc
    if type(obj) not in codec._BY_CLASS:
        raise codec.DecodeError("not a record")
    return obj


def outcome(fn: Any, data: bytes) -> Any:
    try:
        return fn(data)
    except codec.DecodeError:
        return codec.DecodeError


@pytest.mark.parametrize("message", SAMPLES, ids=lambda m: type(m).__name__)
def test_encode_is_byte_identical_to_two_packb_calls(message: object) -> None:
    assert codec.encode(message) == reference_encode(message)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 70_000))
def test_every_ext_size_class_round_trips(size: int) -> None:
    # Payload sizes across fixext, ext 8, ext 16 and ext 32 headers.
    message = FetchResponse(ErrorCode.NONE, 1, 2, 3, 4, 0, (Entry(3, 2, b"\x01" * size),))
    data = codec.encode(message)
    assert data == reference_encode(message)
    assert codec.decode(data) == message


def test_a_fixext_sized_payload_takes_the_same_path() -> None:
    for size in (1, 2, 4, 8, 16):
        payload = msgpack.packb(("raft.NoOp",) + (None,) * 0)[:size].ljust(size, b"\xc0")
        data = msgpack.packb(msgpack.ExtType(1, payload))
        assert outcome(codec.decode, data) == outcome(reference_decode, data)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(SAMPLES), st.data())
def test_decode_agrees_with_the_general_path_on_corrupted_frames(
    message: object, data: st.DataObject
) -> None:
    frame = bytearray(codec.encode(message))
    for _ in range(data.draw(st.integers(0, 3))):
        i = data.draw(st.integers(0, len(frame) - 1))
        frame[i] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(frame)))
    extra = data.draw(st.binary(max_size=3))
    raw = bytes(frame[:cut]) + extra
    assert outcome(codec.decode, raw) == outcome(reference_decode, raw)


@codec.register("test.fast_paths.Optionals")
@dataclass(frozen=True, slots=True)
class Optionals:
    count: int | None
    where: OffsetAndEpoch | None
    name: str | None = None


def frame_of(*fields: Any) -> bytes:
    payload = msgpack.packb(("test.fast_paths.Optionals", *fields), use_bin_type=True)
    return msgpack.packb(msgpack.ExtType(1, payload))  # type: ignore[no-any-return]


def test_optional_fields_take_none_and_still_refuse_wrong_types() -> None:
    assert codec.decode(frame_of(None, None, None)) == Optionals(None, None, None)
    assert codec.decode(frame_of(3, ("raft.OffsetAndEpoch", 5, 2))) == Optionals(
        3, OffsetAndEpoch(5, 2)
    )
    for bad, message in (
        ((True, None), "field count: expected int | NoneType, got bool"),
        ((None, "x"), "field where: expected OffsetAndEpoch | NoneType, got str"),
        ((None, None, b"n"), "field name: expected str | NoneType, got bytes"),
    ):
        with pytest.raises(codec.DecodeError, match=message.replace("|", r"\|")):
            codec.decode(frame_of(*bad))


def build_field_by_field(payload: tuple[Any, ...]) -> Any:
    """`_build` without the exact-types shortcut: every field through its checker."""
    spec = codec._BY_TAG[payload[0]]
    checkers = spec.checkers or codec._compile(spec)
    try:
        return spec.cls(*[check(v) for check, v in zip(checkers, payload[1:], strict=True)])
    except codec.DecodeError:
        return codec.DecodeError


FIELD_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**63), 2**64 - 1), st.text(max_size=4),
    st.binary(max_size=4), st.floats(allow_nan=False), st.tuples(st.integers()),
)  # fmt: skip


@settings(max_examples=300)
@given(
    st.sampled_from(["raft.Entry", "client.KvRequest", "client.KvResponse", "metadata.KvPut",
                     "test.fast_paths.Optionals"]),  # fmt: skip
    st.data(),
)
def test_exact_types_build_what_the_field_checkers_build(tag: str, data: st.DataObject) -> None:
    spec = codec._BY_TAG[tag]
    fields = tuple(data.draw(FIELD_VALUES) for _ in spec.names)
    payload = (tag, *fields)
    expected = build_field_by_field(payload)
    try:
        got = codec._build(payload, None)
    except codec.DecodeError:
        got = codec.DecodeError
    assert got == expected
    if got is not codec.DecodeError:  # 1 == True: the field types must match too
        assert [type(v) for v in spec.getter(got)] == [type(v) for v in spec.getter(expected)]


def test_the_shortcut_covers_plain_fields_only() -> None:
    entry = codec._BY_TAG["raft.Entry"]
    codec._compile(entry)
    assert entry.exact_types == {(int, int, bytes, bool, int)}
    fetch = codec._BY_CLASS[FetchResponse]
    codec._compile(fetch)
    assert fetch.exact_types is None  # an enum and a tuple of records: checked field by field
