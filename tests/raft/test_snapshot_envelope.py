"""The snapshot envelope (quorum/raft/snapshot.py): what goes in comes out, and anything else,
torn or with one flipped bit, is CorruptSnapshot, never a wrong payload."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from quorum.raft.snapshot import CorruptSnapshot, decode_snapshot, encode_snapshot
from quorum.raft.voters import Voter, VotersRecord

VOTERS = VotersRecord.of([Voter(2, "127.0.0.1:9094"), Voter(1, "127.0.0.1:9093")])


@given(payload=st.binary(max_size=300), with_voters=st.booleans())
def test_round_trip(payload: bytes, with_voters: bool) -> None:
    voters = VOTERS if with_voters else None
    envelope = decode_snapshot(encode_snapshot(voters, payload))
    assert (envelope.voters, envelope.payload) == (voters, payload)


@given(payload=st.binary(min_size=1, max_size=100), data=st.data())
def test_any_flipped_bit_or_cut_is_detected(payload: bytes, data: st.DataObject) -> None:
    good = encode_snapshot(VOTERS, payload)
    index = data.draw(st.integers(0, len(good) - 1))
    bit = data.draw(st.integers(0, 7))
    flipped = bytearray(good)
    flipped[index] ^= 1 << bit
    with pytest.raises(CorruptSnapshot):
        decode_snapshot(bytes(flipped))
    cut = data.draw(st.integers(0, len(good) - 1))
    with pytest.raises(CorruptSnapshot):
        decode_snapshot(good[:cut])
    with pytest.raises(CorruptSnapshot):
        decode_snapshot(good + b"\0")


def test_voters_are_sorted_by_id() -> None:
    assert VOTERS.ids == (1, 2)
    assert VOTERS.endpoint_of(2) == "127.0.0.1:9094" and VOTERS.endpoint_of(7) == ""
