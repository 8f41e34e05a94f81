"""Leader epoch cache: Kafka's endOffsetFor semantics, truncation from both ends, persistence in
the leader-epoch-checkpoint format, and trimming to the log end on recovery."""

from __future__ import annotations

import random

from partition.log import batch as rb
from partition.log.checkpoint import read_epochs, read_whole
from partition.log.epoch_cache import LeaderEpochCache
from partition.log.log import PartitionLog
from partition.log.storage import SimStorage


def cache_with(*pairs: tuple[int, int]) -> tuple[SimStorage, LeaderEpochCache]:
    sim = SimStorage()
    cache = LeaderEpochCache(sim, "leader-epoch-checkpoint")
    for e, o in pairs:
        cache.assign(e, o)
    return sim, cache


def test_end_offset_for() -> None:
    _, cache = cache_with((1, 0), (3, 10), (6, 25))
    leo = 40
    assert cache.end_offset_for(1, leo) == (1, 10)
    assert cache.end_offset_for(2, leo) == (1, 10)  # largest epoch <= 2 is 1, it ends where 3 starts
    assert cache.end_offset_for(3, leo) == (3, 25)
    assert cache.end_offset_for(5, leo) == (3, 25)
    assert cache.end_offset_for(6, leo) == (6, 40)  # the latest epoch ends at the LEO
    assert cache.end_offset_for(9, leo) == (6, 40)
    assert cache.end_offset_for(0, leo) == (-1, -1)  # below every known epoch
    assert cache.end_offset_for(-1, leo) == (-1, -1)
    assert LeaderEpochCache(None, None).end_offset_for(3, 0) == (-1, -1)


def test_assign_rules() -> None:
    _, cache = cache_with((1, 0), (3, 10))
    assert not cache.assign(3, 15)  # same epoch later on: no change
    assert cache.assign(3, 8)  # same epoch, earlier start: a rewritten log
    assert [(e.epoch, e.start_offset) for e in cache.entries] == [(1, 0), (3, 8)]
    assert cache.assign(2, 5)  # a lower epoch drops every entry with epoch >= 2 or start >= 5
    assert [(e.epoch, e.start_offset) for e in cache.entries] == [(1, 0), (2, 5)]
    assert cache.epoch_for_offset(4) == 1 and cache.epoch_for_offset(5) == 2


def test_truncate_from_end_and_start() -> None:
    _, cache = cache_with((1, 0), (3, 10), (6, 25))
    cache.truncate_from_end(25)
    assert [(e.epoch, e.start_offset) for e in cache.entries] == [(1, 0), (3, 10)]
    cache.truncate_from_end(11)
    assert [(e.epoch, e.start_offset) for e in cache.entries] == [(1, 0), (3, 10)]
    _, cache = cache_with((1, 0), (3, 10), (6, 25))
    cache.truncate_from_start(12)
    assert [(e.epoch, e.start_offset) for e in cache.entries] == [(3, 12), (6, 25)]
    cache.truncate_from_start(25)
    assert [(e.epoch, e.start_offset) for e in cache.entries] == [(6, 25)]


def test_persisted_in_kafka_format_and_reloaded() -> None:
    sim, cache = cache_with((0, 0), (4, 7))
    assert read_whole(sim, "leader-epoch-checkpoint") == b"0\n2\n0 0\n4 7\n"
    cache.truncate_from_end(7)
    assert read_epochs(sim, "leader-epoch-checkpoint") == [(0, 0)]
    assert LeaderEpochCache(sim, "leader-epoch-checkpoint").entries == cache.entries


def test_recovery_trims_epochs_past_the_log_end() -> None:
    sim = SimStorage()
    log = PartitionLog.open(sim, "/d", "t", 0)
    log.append_as_leader(rb.encode_batch([rb.Record(b"a")] * 3), 1)
    log.flush()
    log.append_as_leader(rb.encode_batch([rb.Record(b"b")] * 2), 2)  # epoch 2 persisted, data not
    assert read_epochs(sim, "/d/t-0/leader-epoch-checkpoint") == [(1, 0), (2, 3)]
    sim.crash()
    log = PartitionLog.open(sim, "/d", "t", 0)
    assert log.log_end_offset == 3
    assert [(e.epoch, e.start_offset) for e in log.epoch_cache.entries] == [(1, 0)]
    assert read_epochs(sim, "/d/t-0/leader-epoch-checkpoint") == [(1, 0)]


def test_recovery_rebuilds_epochs_missing_from_the_checkpoint() -> None:
    sim = SimStorage()
    log = PartitionLog.open(sim, "/d", "t", 0)
    log.append_as_follower(rb.encode_batch([rb.Record(b"a")], base_offset=0, partition_leader_epoch=1)
                           + rb.encode_batch([rb.Record(b"b")], base_offset=1, partition_leader_epoch=4))
    log.flush()
    sim.remove("/d/t-0/leader-epoch-checkpoint")
    log = PartitionLog.open(sim, "/d", "t", 0, recovery_point=0)
    assert [(e.epoch, e.start_offset) for e in log.epoch_cache.entries] == [(1, 0), (4, 1)]


def test_written_on_flush_for_a_raft_log_and_recovered_either_way() -> None:
    sim = SimStorage()
    log = PartitionLog.open(sim, "/d", "t", 0)
    log.epoch_cache.write_on_flush()  # as partition.raft.log does
    log.append_as_follower(rb.encode_batch([rb.Record(b"a")], base_offset=0, partition_leader_epoch=1))
    assert read_epochs(sim, "/d/t-0/leader-epoch-checkpoint") == []  # not yet: no flush
    log.flush()
    assert read_epochs(sim, "/d/t-0/leader-epoch-checkpoint") == [(1, 0)]
    log.append_as_follower(rb.encode_batch([rb.Record(b"b")], base_offset=1, partition_leader_epoch=3))
    sim.crash()  # before the flush: neither the batch nor its epoch survive
    log = PartitionLog.open(sim, "/d", "t", 0, recovery_point=1)
    assert [(e.epoch, e.start_offset) for e in log.epoch_cache.entries] == [(1, 0)]
    log.epoch_cache.write_on_flush()
    log.append_as_follower(rb.encode_batch([rb.Record(b"c")], base_offset=1, partition_leader_epoch=4))
    sim.crash(random.Random(7))  # page cache written back (or not): the scan finds epoch 4 if kept
    log = PartitionLog.open(sim, "/d", "t", 0, recovery_point=1)
    expected = [(1, 0), (4, 1)] if log.log_end_offset == 2 else [(1, 0)]
    assert [(e.epoch, e.start_offset) for e in log.epoch_cache.entries] == expected
