"""Every raft partition's election state of one broker in one file (partition/raft/election_states.py):
what was written reads back, a power loss keeps the last complete write, and an unreadable file
refuses to load (a forgotten vote could be given twice in one epoch)."""

from __future__ import annotations

import random

import pytest

from partition.log import SimStorage
from partition.log.errors import CheckpointError
from partition.log.storage import read_whole
from partition.raft import ElectionStates
from quorum.raft.effects import ElectionState

PATH = "/data/raft-election-states"


def test_what_was_written_reads_back() -> None:
    storage = SimStorage()
    storage.make_dirs("/data")
    states = ElectionStates(storage, PATH)
    states.load()  # no file yet: nothing
    assert states.get(("t", 0)) is None
    states.put(("t", 0), ElectionState(3, voted_id=2, leader_id=None))
    states.put(("t/with/slashes", 11), ElectionState(5, voted_id=None, leader_id=1))
    states.write()
    again = ElectionStates(storage, PATH)
    again.load()
    assert again.get(("t", 0)) == ElectionState(3, 2, None)
    assert again.get(("t/with/slashes", 11)) == ElectionState(5, None, 1)
    again.forget(("t", 0))
    again.write()
    third = ElectionStates(storage, PATH)
    third.load()
    assert third.get(("t", 0)) is None and third.get(("t/with/slashes", 11)) is not None


@pytest.mark.parametrize("seed", range(20))
def test_a_power_loss_keeps_one_complete_write(seed: int) -> None:
    storage = SimStorage()
    storage.make_dirs("/data")
    states = ElectionStates(storage, PATH)
    states.put(("t", 0), ElectionState(1, voted_id=1))
    states.write()
    states.put(("t", 0), ElectionState(2, voted_id=3))
    states.put(("t", 1), ElectionState(2, voted_id=3))
    states.write()
    storage.crash(random.Random(seed))
    after = ElectionStates(storage, PATH)
    after.load()  # never a torn file: the write was atomic and durable before it returned
    assert after.get(("t", 0)) == ElectionState(2, voted_id=3)


def test_an_unreadable_file_refuses_to_load() -> None:
    storage = SimStorage()
    storage.make_dirs("/data")
    handle = storage.open(PATH)
    handle.append(b'{"version": 0, "partitions": {"t/0": {"leaderEpoch": 1}}}')
    handle.close()
    with pytest.raises(CheckpointError, match="unreadable election states"):
        ElectionStates(storage, PATH).load()
    assert read_whole(storage, PATH)  # left as it was, for an operator to look at
