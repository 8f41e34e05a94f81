"""Metadata records: exact round trip through the codec, and garbage is a DecodeError."""

from __future__ import annotations

import contextlib

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from quorum import codec
from quorum.metadata.records import (
    BrokerRegistrationChange,
    Config,
    DecodeError,
    Endpoint,
    FenceBroker,
    KvCas,
    KvDelete,
    KvPut,
    LeaderChange,
    NoOp,
    Partition,
    PartitionChange,
    ProducerIds,
    RegisterBroker,
    RemoveTopic,
    Topic,
    UnfenceBroker,
    decode_record,
    encode_record,
)

ids = st.integers(min_value=-1, max_value=2**31)
small = st.integers(min_value=0, max_value=1000)
names = st.text(max_size=12)
values = st.one_of(st.text(max_size=20), st.binary(max_size=20))
id_tuples = st.lists(small, max_size=5).map(tuple)
maybe_ids = st.none() | id_tuples
endpoints = st.builds(Endpoint, names, names, st.integers(0, 65535))

records = st.one_of(
    st.builds(KvPut, names, values),
    st.builds(KvDelete, names),
    st.builds(KvCas, names, st.none() | values, values),
    st.builds(
        RegisterBroker,
        ids,
        names,
        st.lists(endpoints, max_size=3).map(tuple),
        st.none() | names,
        st.booleans(),
        st.booleans(),
    ),
    st.builds(FenceBroker, ids, ids),
    st.builds(UnfenceBroker, ids, ids),
    st.builds(
        BrokerRegistrationChange, ids, ids, st.none() | st.booleans(), st.none() | st.booleans()
    ),
    st.builds(Topic, names, names, st.lists(st.tuples(names, names), max_size=3).map(tuple)),
    st.builds(
        Partition,
        names,
        small,
        id_tuples,
        id_tuples,
        ids,
        small,
        small,
        id_tuples,
        id_tuples,
        st.sampled_from([0, 1]),
    ),
    st.builds(
        PartitionChange,
        names,
        small,
        st.none() | ids,
        maybe_ids,
        maybe_ids,
        maybe_ids,
        st.none() | st.sampled_from([0, 1]),
        maybe_ids,
    ),
    st.builds(RemoveTopic, names),
    st.builds(Config, names, names, names, st.none() | names),
    st.builds(ProducerIds, ids, ids, ids),
    st.just(NoOp()),
    st.builds(LeaderChange, ids, small, id_tuples),
)


@given(records)
def test_every_record_round_trips_exactly(record: object) -> None:
    data = encode_record(record)  # type: ignore[arg-type]
    assert decode_record(data) == record
    assert type(decode_record(data)) is type(record)


@given(st.binary(max_size=64))
def test_random_bytes_decode_to_a_record_or_raise_decode_error(data: bytes) -> None:
    with contextlib.suppress(DecodeError):
        decode_record(data)


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\xc1",  # never-used msgpack byte
        msgpack.packb([1, {"key": "a"}]),  # plain array, not a codec record
        msgpack.packb({"key": "a"}),
    ],
)
def test_garbage_raises_decode_error(data: bytes) -> None:
    with pytest.raises(DecodeError):
        decode_record(data)


def test_truncated_record_raises_decode_error() -> None:
    data = encode_record(KvPut("k", "v"))
    with pytest.raises(DecodeError):
        decode_record(data[:-1])


def _frame(*payload: object) -> bytes:
    """A codec frame (ext type 1, [tag, fields...]) built by hand."""
    return msgpack.packb(msgpack.ExtType(1, msgpack.packb(payload)))


def test_hand_built_frame_matches_the_codec() -> None:
    assert decode_record(_frame("metadata.KvPut", "k", "v")) == KvPut("k", "v")


@pytest.mark.parametrize(
    "payload",
    [
        ("metadata.KvPut", 5, "v"),  # key must be str
        ("metadata.KvPut", "k"),  # value missing
        ("metadata.KvPut", "k", "v", "extra"),  # unknown field
        ("metadata.NoSuchRecord", "k"),
        ("metadata.FenceBroker", 1, True),  # bool is not an int
    ],
)
def test_ill_formed_frames_raise_decode_error(payload: tuple[object, ...]) -> None:
    with pytest.raises(DecodeError):
        decode_record(_frame(*payload))


def test_a_codec_frame_of_a_non_record_type_is_refused() -> None:
    with pytest.raises(DecodeError, match="not a metadata record"):
        decode_record(codec.encode(Endpoint("rpc", "127.0.0.1", 9093)))


def test_encoding_a_non_record_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        encode_record(Endpoint("rpc", "h", 1))  # type: ignore[arg-type]
