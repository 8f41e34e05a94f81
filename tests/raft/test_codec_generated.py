"""quorum.codec's generated per-class encoders and builders change nothing but speed.

- Encoding: the generated encoder lays nested records out itself; the bytes must be those of
  packb(ExtType(1, packb([tag, fields...], default=_default))), whatever the field values.
- Decoding: the generated builder takes the payloads it recognises and hands every other one to
  the checked path. On any payload of any registered tag it must give what the checked path alone
  gives: the same record with the same field types, or a DecodeError with the same message.
- The frames of a sequential commit (harness/bench/codec.py), truncated, with a field of the
  wrong type, an extra field or fewer fields, are DecodeErrors that name what is wrong.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import harness.drive.controller_rpc  # noqa: F401 - registers node.* frames
import harness.net.client  # noqa: F401 - registers client.* frames
import harness.net.data_protocol  # noqa: F401 - registers client.* data frames
import partition.raft.mux  # noqa: F401 - registers raftpart.* frames
import partition.replica.messages  # noqa: F401 - registers replica.* frames
import quorum.controller.messages  # noqa: F401 - registers controller.* frames
import quorum.metadata.image  # noqa: F401 - registers metadata.image.* records
import quorum.metadata.records  # noqa: F401 - registers metadata.* records
import quorum.raft.snapshot  # noqa: F401 - registers raft.SnapshotEnvelope
from harness.bench.codec import commit_frames
from quorum import codec
from quorum.raft.log import Entry, OffsetAndEpoch
from quorum.raft.messages import ErrorCode, FetchRequest, FetchResponse
from quorum.raft.voters import Voter, VotersRecord
from tests.raft.test_codec import SAMPLES


def reference_encode(obj: Any) -> bytes:
    spec = codec._BY_CLASS[type(obj)]
    payload = msgpack.packb((spec.tag, *spec.getter(obj)), default=codec._default,
                            use_bin_type=True)  # fmt: skip
    return msgpack.packb(msgpack.ExtType(1, payload))  # type: ignore[no-any-return]


@contextlib.contextmanager
def checked_path_only() -> Iterator[None]:
    """Every record built by `_build_checked` alone, nested ones too (no generated builder)."""
    saved = {tag: spec.build for tag, spec in codec._BY_TAG.items()}
    try:
        for spec in codec._BY_TAG.values():
            spec.build = lambda p, s=spec: codec._build_checked(s, p)
        yield
    finally:
        for tag, build in saved.items():
            codec._BY_TAG[tag].build = build


def outcome(payload: tuple[Any, ...]) -> tuple[str, str]:
    """(type, repr) of the record built (a repr tells 1 from True from 1.0, an enum from its
    value, a tuple from a list), or ("DecodeError", message)."""
    try:
        got = codec._build(payload, None)
    except codec.DecodeError as exc:
        return ("DecodeError", str(exc))
    return (type(got).__name__, repr(got))


# ------------------------------------------------------------------------------- payload strategy

ANY_VALUE = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**63), 2**64 - 1), st.floats(allow_nan=False),
    st.text(max_size=4), st.binary(max_size=4), st.tuples(st.integers()),
    st.tuples(st.text(max_size=3), st.integers()),
)  # fmt: skip


PLAIN: dict[Any, st.SearchStrategy[Any]] = {
    int: st.integers(-(2**63), 2**64 - 1), float: st.floats(), str: st.text(max_size=4),
    bytes: st.binary(max_size=4), bool: st.booleans(),
}  # fmt: skip


def wire_value(hint: Any, depth: int) -> st.SearchStrategy[Any]:
    """A value of `hint` as it arrives on the wire: nested records as (tag, ...) tuples (now and
    then altered as `payloads_of` alters one), enums as their values."""
    return _well_typed(hint, depth) if depth < 4 else ANY_VALUE


def _well_typed(hint: Any, depth: int) -> st.SearchStrategy[Any]:  # noqa: C901 - one per form
    origin = typing.get_origin(hint)
    if origin is typing.Union or origin is types.UnionType:
        return st.one_of([wire_value(a, depth) for a in typing.get_args(hint)])
    if hint is type(None):
        return st.none()
    if hint in PLAIN:
        return PLAIN[hint]
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return st.sampled_from([m.value for m in hint])
    if origin is tuple:
        args = typing.get_args(hint)
        if len(args) == 2 and args[1] is Ellipsis:
            return st.lists(wire_value(args[0], depth + 1), max_size=3).map(tuple)
        return st.tuples(*(wire_value(a, depth + 1) for a in args))
    if origin is dict:
        key, value = typing.get_args(hint)
        return st.dictionaries(wire_value(key, depth + 1), wire_value(value, depth + 1),
                               max_size=2)  # fmt: skip
    if origin is typing.Literal:
        return st.sampled_from(typing.get_args(hint))
    spec = codec._BY_CLASS.get(hint) if isinstance(hint, type) else None
    if spec is not None:
        return payloads_of(spec, depth + 1)
    return ANY_VALUE


def payloads_of(spec: Any, depth: int = 0) -> st.SearchStrategy[tuple[Any, ...]]:
    """Payloads of `spec`'s tag: well typed as sent, or altered once (a field replaced by any
    value, trailing fields left off as older senders do, one field more than known)."""
    hints = typing.get_type_hints(spec.cls)
    full = st.tuples(st.just(spec.tag), *(wire_value(hints[n], depth) for n in spec.names))
    n = len(spec.names)
    return st.tuples(full, st.integers(0, 9 if depth else 5), st.integers(1, max(n, 1)),
                     ANY_VALUE).map(_alter)  # fmt: skip


def _alter(draw: tuple[tuple[Any, ...], int, int, Any]) -> tuple[Any, ...]:
    payload, how, where, value = draw
    if how == 1 and where < len(payload):
        return (*payload[:where], value, *payload[where + 1 :])
    if how == 2:
        return payload[:where]
    if how == 3:
        return (*payload, value)
    if how == 4:  # another record of the same arity (a nested one in the wrong place)
        same = ARITY[len(payload)]
        return (same[where % len(same)], *payload[1:])
    return payload


ARITY: dict[int, list[str]] = {}
for _tag, _cls in sorted(codec.registered_tags().items()):
    ARITY.setdefault(len(codec._BY_TAG[_tag].names) + 1, []).append(_tag)


PAYLOADS = st.one_of([payloads_of(codec._BY_TAG[tag]) for tag in sorted(codec.registered_tags())])


@settings(max_examples=1000, deadline=None)
@given(PAYLOADS)
def test_generated_builders_agree_with_the_checked_path(payload: tuple[Any, ...]) -> None:
    with checked_path_only():
        expected = outcome(payload)
    assert outcome(payload) == expected


HOT = commit_frames()


@pytest.mark.parametrize("name", sorted(HOT))
def test_the_commit_frames_round_trip_byte_identically(name: str) -> None:
    message = HOT[name]
    data = codec.encode(message)
    assert data == reference_encode(message)
    decoded = codec.decode(data)
    assert decoded == message
    assert repr(decoded) == repr(message)  # same field types (an int is not a bool here)
    with pytest.raises(dataclasses.FrozenInstanceError):
        decoded.__setattr__(codec._BY_CLASS[type(message)].names[0], 0)


entries = st.builds(Entry, st.integers(0, 2**40), st.integers(0, 2**20), st.binary(max_size=40),
                    st.booleans(), st.integers(1, 5))  # fmt: skip
positions = st.none() | st.builds(OffsetAndEpoch, st.integers(0, 2**40), st.integers(0, 99))
voter_sets = st.none() | st.builds(
    VotersRecord, st.lists(st.builds(Voter, st.integers(0, 9), st.text(max_size=8)),
                           max_size=3).map(tuple))  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(ErrorCode), st.none() | st.integers(0, 9), st.lists(entries, max_size=3),
    positions, positions, voter_sets, st.integers(0, 2**31),
)  # fmt: skip
def test_fetch_responses_encode_as_the_generic_path_and_round_trip(
    error: ErrorCode, leader: int | None, records: list[Entry], diverging: OffsetAndEpoch | None,
    snapshot: OffsetAndEpoch | None, voters: VotersRecord | None, hw: int,
) -> None:  # fmt: skip
    message = FetchResponse(error, leader, 4, 10, hw, 0, tuple(records), diverging, snapshot, 3,
                            2, voters)  # fmt: skip
    data = codec.encode(message)
    assert data == reference_encode(message)
    assert codec.decode(data) == message


@pytest.mark.parametrize(
    "records",
    [
        (OffsetAndEpoch(1, 1),),  # a record of another type in the one-entry layout
        (Entry(1, 1, b"a"), OffsetAndEpoch(1, 1)),
        [Entry(1, 1, b"a")],  # a list, not a tuple
        (),
    ],
    ids=["other-record", "mixed", "list", "empty"],
)
def test_ill_typed_nested_records_encode_as_the_generic_path(records: Any) -> None:
    message = FetchResponse(ErrorCode.NONE, 1, 2, 3, 4, 0, records)
    assert codec.encode(message) == reference_encode(message)


@pytest.mark.parametrize("message", SAMPLES, ids=lambda m: type(m).__name__)
def test_every_sample_decodes_the_same_on_both_paths(message: object) -> None:
    data = codec.encode(message)
    decoded = codec.decode(data)
    with checked_path_only():
        assert repr(codec.decode(data)) == repr(decoded)


# -------------------------------------------------------------------- malformed commit frames


def laid_out(message: Any) -> tuple[Any, ...]:
    """(tag, fields...) of `message` as the codec packs it (nested records as tuples)."""
    spec = codec._BY_CLASS[type(message)]
    return (spec.fields or codec._compile_fields(spec))(message)


def frame_of(*values: object) -> bytes:
    payload = msgpack.packb(values, use_bin_type=True)
    return msgpack.packb(msgpack.ExtType(1, payload))  # type: ignore[no-any-return]


@pytest.mark.parametrize("name", sorted(HOT))
def test_truncated_commit_frames_are_decode_errors(name: str) -> None:
    data = codec.encode(HOT[name])
    for cut in range(len(data)):
        with pytest.raises(codec.DecodeError):
            codec.decode(data[:cut])


def wire_types(hint: Any) -> set[type[Any]]:
    """The types a field of `hint` may hold on the wire (an enum's field an int, or a bool: the
    enum's constructor takes True for 1; a record's or an array's a tuple)."""
    args = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    out: set[type[Any]] = set()
    for a in args:
        if isinstance(a, type) and issubclass(a, enum.Enum):
            out |= {int, bool}
        elif a in (int, str, bytes, bool, type(None)):
            out.add(a)
        else:  # a record, an array
            out.add(tuple)
    return out


@pytest.mark.parametrize("name", sorted(HOT))
def test_each_field_of_the_wrong_type_is_a_decode_error_naming_it(name: str) -> None:
    message = HOT[name]
    spec = codec._BY_CLASS[type(message)]
    fields = list(laid_out(message))
    hints = typing.get_type_hints(type(message))
    for i, field in enumerate(spec.names):
        for wrong in (True, 1.5, b"\x00", "s", ("x",), None):
            if type(wrong) in wire_types(hints[field]):
                continue
            bad = fields.copy()
            bad[i + 1] = wrong
            with pytest.raises(codec.DecodeError, match=f"{spec.tag}: .*field {field}"):
                codec.decode(frame_of(*bad))


@pytest.mark.parametrize("name", sorted(HOT))
def test_an_extra_field_is_refused_and_missing_defaults_are_filled(name: str) -> None:
    message = HOT[name]
    spec = codec._BY_CLASS[type(message)]
    wire = laid_out(message)
    fields = spec.getter(message)
    with pytest.raises(codec.DecodeError, match="unknown field"):
        codec.decode(frame_of(*wire, 0))
    defaults = [f.default for f in dataclasses.fields(message)]  # type: ignore[arg-type]
    for n in range(len(fields)):
        shorter = frame_of(*wire[: n + 1])
        if n < spec.required:
            with pytest.raises(codec.DecodeError, match="missing field"):
                codec.decode(shorter)
        else:
            assert codec.decode(shorter) == type(message)(*fields[:n], *defaults[n:])


def fetch_response_frame(records: Any, diverging_epoch: Any = None) -> bytes:
    """A FetchResponse frame of full arity (the generated builder's case)."""
    return frame_of("raft.FetchResponse", 0, 2, 1, 5, 5, 0, records, diverging_epoch, None, 0,
                    1, None)  # fmt: skip


def test_a_malformed_nested_entry_is_a_decode_error_naming_it() -> None:
    ok = ("raft.Entry", 5, 1, b"v", False, 1)
    assert codec.decode(fetch_response_frame((ok,))).records == (Entry(5, 1, b"v"),)
    for records, fragment in (
        ((("raft.OffsetAndEpoch", 5, 1),), "expected raft.Entry, got raft.OffsetAndEpoch"),
        ((ok[:3],), "raft.Entry: missing field(s) data"),
        (((*ok, 1),), "raft.Entry: unknown field(s)"),
        ((("raft.Entry", 5, "1", b"v", False, 1),), "field epoch: expected int, got str"),
        ((ok, ("raft.Entry", 6, 1, "v", False, 1)), "field data: expected bytes, got str"),
        ((5,), "field records: expected Entry, got int"),
        (ok, "field records: expected Entry, got str"),  # the entry itself, not a tuple of them
    ):
        with pytest.raises(codec.DecodeError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
            codec.decode(fetch_response_frame(records))


@codec.register("test.generated.EntryLike")
@dataclass(frozen=True, slots=True)
class EntryLike:
    offset: int
    epoch: int
    data: bytes
    control: bool = False
    count: int = 1


def test_a_nested_record_of_the_same_shape_but_another_tag_is_refused() -> None:
    like = ("test.generated.EntryLike", 5, 1, b"v", False, 1)
    for records in ((like,), (like, like)):  # one entry, and several
        with pytest.raises(codec.DecodeError,
                           match="expected raft.Entry, got test.generated.EntryLike"):  # fmt: skip
            codec.decode(fetch_response_frame(records))
    with pytest.raises(codec.DecodeError, match="field diverging_epoch"):
        codec.decode(fetch_response_frame((), ("raft.BeginQuorumEpochRequest", 5, 2)))


def test_a_frame_of_an_unknown_error_code_is_refused() -> None:
    fields = ("raft.FetchResponse", 9999, 2, 1, 5, 5, 0, ())
    with pytest.raises(codec.DecodeError, match="field error: expected ErrorCode, got int"):
        codec.decode(frame_of(*fields))


# ----------------------------------------------------------- construction without __init__


def test_plain_dataclasses_are_built_by_setting_their_slots() -> None:
    for cls in (FetchRequest, FetchResponse, Entry, harness.net.client.KvRequest):
        assert codec._slot_setters(codec._BY_CLASS[cls]) is not None, cls


@codec.register("test.generated.Checked")
@dataclass(frozen=True, slots=True)
class Checked:
    low: int
    high: int

    def __post_init__(self) -> None:
        if self.low > self.high:
            raise ValueError("low above high")


@codec.register("test.generated.Normalised")
@dataclass(frozen=True, slots=True)
class Normalised:
    name: str

    def __init__(self, name: str) -> None:
        object.__setattr__(self, "name", name.lower())


def test_a_class_with_its_own_init_or_post_init_is_built_through_it() -> None:
    assert codec._slot_setters(codec._BY_CLASS[Checked]) is None
    assert codec._slot_setters(codec._BY_CLASS[Normalised]) is None
    assert codec.decode(frame_of("test.generated.Checked", 1, 2)) == Checked(1, 2)
    with pytest.raises(codec.DecodeError, match="low above high"):
        codec.decode(frame_of("test.generated.Checked", 3, 2))
    assert codec.decode(frame_of("test.generated.Normalised", "ABC")).name == "abc"


@codec.register("test.generated.Tree")
@dataclass(frozen=True, slots=True)
class Tree:
    value: int
    children: tuple[Tree, ...] = ()


def test_a_record_nested_in_itself_round_trips_and_is_checked_at_every_depth() -> None:
    tree = Tree(1, (Tree(2), Tree(3, (Tree(4),))))
    data = codec.encode(tree)
    assert data == reference_encode(tree)
    assert codec.decode(data) == tree
    bad = frame_of("test.generated.Tree", 1, (("test.generated.Tree", 2, (("test.generated.Tree",
                                                                            "4", ()),)),))  # fmt: skip
    with pytest.raises(codec.DecodeError, match="field value: expected int, got str"):
        codec.decode(bad)


@codec.register("test.generated.Unslotted")
@dataclass(frozen=True)
class Unslotted:
    name: str


def test_a_class_without_slots_is_built_through_its_constructor() -> None:
    assert codec._slot_setters(codec._BY_CLASS[Unslotted]) is None
    decoded = codec.decode(codec.encode(Unslotted("a")))
    assert decoded == Unslotted("a")
    with pytest.raises(dataclasses.FrozenInstanceError):
        decoded.name = "b"  # type: ignore[misc]
