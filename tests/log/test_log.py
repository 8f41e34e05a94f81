"""PartitionLog behaviour: offsets and epochs on append, follower appends, reads through the index,
rolls, truncation, retention limits (never the active segment, never at or above the HW), flush
policy, producer idempotence across reopen, and the LogManager's checkpoint files."""

from __future__ import annotations

import pytest

from partition.log import batch as rb
from partition.log.checkpoint import read_offsets
from partition.log.config import LogConfig
from partition.log.errors import (
    CorruptRecordError,
    FencedLeaderEpochError,
    InvalidProducerEpochError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    UnexpectedAppendOffsetError,
)
from partition.log.log import PartitionLog
from partition.log.manager import LogManager
from partition.log.storage import SimStorage


def batch(n: int = 1, ts: int = 0, value: bytes = b"v", **kw: int) -> bytes:
    return rb.encode_batch([rb.Record(value, timestamp_ms=ts) for _ in range(n)], **kw)  # type: ignore[arg-type]


def open_log(sim: SimStorage, **cfg: int) -> PartitionLog:
    return PartitionLog.open(sim, "/logs", "orders", 3, LogConfig(**cfg))  # type: ignore[arg-type]


def test_leader_append_assigns_offsets_and_stamps_epoch() -> None:
    log = open_log(SimStorage())
    a = log.append_as_leader(batch(3, base_offset=999), leader_epoch=4)
    b = log.append_as_leader(batch(2), leader_epoch=5)
    assert (a.first_offset, a.last_offset, b.first_offset, b.last_offset) == (0, 2, 3, 4)
    headers = log.batch_headers()
    assert [(h.base_offset, h.partition_leader_epoch) for h in headers] == [(0, 4), (3, 5)]
    for h in headers:  # patched in place: the CRC still holds
        data = log.read(h.base_offset, 1)
        assert rb.validate(data).base_offset == h.base_offset
    assert [(e.epoch, e.start_offset) for e in log.epoch_cache.entries] == [(4, 0), (5, 3)]
    assert log.directory == "/logs/orders-3"


def test_rejected_appends_change_nothing() -> None:
    sim = SimStorage()
    log = open_log(sim)
    log.append_as_leader(batch(2), 3)
    bad = bytearray(batch(1))
    bad[-1] ^= 1
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(bytes(bad), 3)
    with pytest.raises(FencedLeaderEpochError):
        log.append_as_leader(batch(1), 2)
    with pytest.raises(UnexpectedAppendOffsetError):
        log.append_as_follower(batch(1, base_offset=5, partition_leader_epoch=3))
    for torn in (b"", batch(1)[:40], batch(1)[:-1], batch(1) + batch(1)[:-1]):
        with pytest.raises(CorruptRecordError):  # the fast path declines; the general one refuses
            log.append_as_leader(torn, 3)
    assert log.log_end_offset == 2 and log.segments[-1].size == len(batch(2))


def test_follower_append_keeps_offsets_and_epochs() -> None:
    log = open_log(SimStorage())
    log.append_as_follower(batch(2, base_offset=0, partition_leader_epoch=1)
                           + batch(3, base_offset=2, partition_leader_epoch=2))
    assert log.log_end_offset == 5
    assert log.epoch_cache.end_offset_for(1, log.log_end_offset) == (1, 2)
    assert log.epoch_cache.end_offset_for(7, log.log_end_offset) == (2, 5)


def test_read_returns_whole_batches_up_to_the_limit_and_the_max_offset() -> None:
    log = open_log(SimStorage(), index_interval_bytes=50)
    sizes = []
    for i in range(10):
        sizes.append(log.append_as_leader(batch(2, value=b"x" * 20, ts=i), 1).size_bytes)
    data = log.read(5, sizes[0] * 2 + 5)
    assert [h.base_offset for h in rb.iter_headers(data)] == [4, 6]  # the batch holding 5 comes whole
    assert log.read(5, 1)  # at least one batch even past the limit
    assert log.read(5, 1, min_one=False) == b""
    assert [h.base_offset for h in rb.iter_headers(log.read(0, 10_000, max_offset=6))] == [0, 2, 4]
    assert log.read(20, 100) == b""
    with pytest.raises(OffsetOutOfRangeError):
        log.read(21, 100)


def test_roll_by_size_and_by_time() -> None:
    log = open_log(SimStorage(), segment_bytes=300, segment_ms=1000)
    one = len(batch(1, value=b"x" * 50))
    for i in range(6):
        log.append_as_leader(batch(1, value=b"x" * 50, ts=i), 1)
    per_segment = 300 // one
    assert [s.base_offset for s in log.segments] == list(range(0, 6, per_segment))
    log2 = open_log(SimStorage(), segment_ms=1000)
    for ts in (0, 500, 1000, 1001, 1500, 2100):
        log2.append_as_leader(batch(1, ts=ts), 1)
    assert [s.base_offset for s in log2.segments] == [0, 3, 5]  # 1001-0 > 1000; 2100-1001 > 1000
    assert log2.storage.exists("/logs/orders-3/00000000000000000003.log")


def test_truncate_to_and_truncate_fully() -> None:
    sim = SimStorage()
    log = open_log(sim, segment_bytes=200)
    for epoch in (1, 1, 2, 2, 3, 3):
        log.append_as_leader(batch(2, value=b"y" * 30), epoch)
    log.update_high_watermark(12)
    assert log.truncate_to(7) == 6  # the batch holding offset 7 goes whole
    assert log.log_end_offset == 6 and log.high_watermark == 6
    assert [(e.epoch, e.start_offset) for e in log.epoch_cache.entries] == [(1, 0), (2, 4)]
    assert log.truncate_to(4) == 4
    assert [(e.epoch, e.start_offset) for e in log.epoch_cache.entries] == [(1, 0)]
    log.append_as_leader(batch(1), 5)
    assert log.read_records(4, 100)[0].offset == 4
    log.truncate_fully(100)
    assert (log.log_start_offset, log.log_end_offset, log.epoch_cache.entries) == (100, 100, ())
    assert log.append_as_leader(batch(1), 6).first_offset == 100
    with pytest.raises(OffsetOutOfRangeError):
        log.truncate_to(50)


def _retention_log(sim: SimStorage, **cfg: int) -> PartitionLog:
    log = open_log(sim, segment_bytes=250, **cfg)
    for i in range(12):
        log.append_as_leader(batch(2, value=b"z" * 40, ts=1000 * i), 1)  # one batch per segment
    return log


def test_retention_never_deletes_at_or_above_the_high_watermark() -> None:
    log = _retention_log(SimStorage(), retention_ms=0)
    bases = [s.base_offset for s in log.segments]
    assert len(bases) >= 4
    log.update_high_watermark(bases[2])  # segments 0 and 1 are wholly below the HW
    assert log.apply_retention(now_ms=10**9) == 2
    assert log.log_start_offset == bases[2] and log.segments[0].base_offset == bases[2]
    log.update_high_watermark(bases[2] + 1)  # segment 2 straddles the HW: kept
    assert log.apply_retention(now_ms=10**9) == 0
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 100)


def test_retention_never_deletes_the_active_segment() -> None:
    log = _retention_log(SimStorage(), retention_ms=0, retention_bytes=0)
    log.update_high_watermark(log.log_end_offset)
    log.apply_retention(now_ms=10**9)
    assert len(log.segments) == 1 and log.segments[0].size > 0
    assert log.log_start_offset == log.segments[0].base_offset


def test_retention_by_time_and_by_bytes() -> None:
    log = _retention_log(SimStorage(), retention_ms=5000)
    log.update_high_watermark(log.log_end_offset)
    max_ts = [s.max_timestamp_ms for s in log.segments]
    assert max_ts == [1000 * i for i in range(12)]
    assert log.apply_retention(now_ms=9000) == 4  # max ts 0..3000 are older than 5000 ms
    assert log.log_start_offset == 8 and log.segments[0].max_timestamp_ms == 4000
    log2 = _retention_log(SimStorage(), retention_bytes=500)
    log2.update_high_watermark(log2.log_end_offset)
    seg = log2.segments[0].size
    log2.apply_retention(now_ms=0)
    assert log2.size_bytes >= 500 > log2.size_bytes - seg  # deletes while the rest stays >= 500
    assert len(log2.segments) == 500 // seg + (1 if 500 % seg else 0)


def test_delete_prefix_moves_log_start() -> None:
    log = _retention_log(SimStorage())
    log.update_high_watermark(8)
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_prefix(9)
    log.delete_prefix(7)
    assert log.log_start_offset == 7 and log.segments[0].base_offset == 6
    assert log.read_records(7, 10)[0].offset == 7


def test_flush_policies() -> None:
    sim = SimStorage()
    log = open_log(sim, flush_messages=3)
    log.append_as_leader(batch(2), 1)
    assert sim.unsynced_bytes() > 0 and log.recovery_point == 0
    log.append_as_leader(batch(1), 1)
    assert sim.unsynced_bytes() == 0 and log.recovery_point == 3
    sim2 = SimStorage()
    log2 = open_log(sim2, fsync_each_append=True)
    log2.append_as_leader(batch(1), 1)
    assert sim2.unsynced_bytes() == 0 and log2.recovery_point == 1
    sim3 = SimStorage()
    log3 = open_log(sim3, flush_ms=100)
    log3.append_as_leader(batch(1), 1)
    assert not log3.maybe_flush(now_ms=1000)  # starts the clock
    assert not log3.maybe_flush(now_ms=1099)
    assert log3.maybe_flush(now_ms=1100) and sim3.unsynced_bytes() == 0
    sim4 = SimStorage()
    log4 = open_log(sim4)  # default: leave it to the OS
    for _ in range(50):
        log4.append_as_leader(batch(1), 1)
    assert not log4.maybe_flush(now_ms=10**12) and log4.recovery_point == 0


def idem(seq: int, n: int = 1, epoch: int = 0, pid: int = 77) -> bytes:
    return batch(n, producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def test_producer_duplicates_and_gaps_survive_reopen() -> None:
    sim = SimStorage()
    log = open_log(sim, segment_bytes=400)
    firsts = [log.append_as_leader(idem(seq, 2), 1).first_offset for seq in range(0, 14, 2)]
    log.flush()
    log.close()
    for reopen in range(2):
        log = open_log(sim, segment_bytes=400)
        for k, seq in enumerate(range(4, 14, 2)):  # the last 5 batches are remembered
            info = log.append_as_leader(idem(seq, 2), 1)
            assert info.duplicate and info.first_offset == firsts[k + 2] and info.last_offset == firsts[k + 2] + 1
        assert log.log_end_offset == 14
        with pytest.raises(OutOfOrderSequenceError):
            log.append_as_leader(idem(15), 1)  # gap: 14 expected
        if reopen == 0:
            log.close()  # clean close: snapshot at the log end
        else:
            sim.crash()  # unclean: rebuilt from the roll snapshots + log tail
    for name in sim.list_dir("/logs/orders-3"):  # no snapshot at all: replay every batch header
        if name.endswith(".snapshot"):
            sim.remove(f"/logs/orders-3/{name}")
    log = open_log(sim, segment_bytes=400)
    assert log.append_as_leader(idem(12, 2), 1).duplicate
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader(idem(0, 2), 1)  # older than the 5 retained batches: not a duplicate
    assert log.append_as_leader(idem(14), 1).first_offset == 14


def test_producer_epoch_fencing_and_new_epoch() -> None:
    log = open_log(SimStorage())
    log.append_as_leader(idem(0, epoch=2), 1)
    with pytest.raises(InvalidProducerEpochError):
        log.append_as_leader(idem(1, epoch=1), 1)
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader(idem(5, epoch=3), 1)  # a new epoch starts at 0
    assert log.append_as_leader(idem(0, epoch=3), 1).first_offset == 1
    assert log.append_as_leader(idem(7, pid=5), 1).first_offset == 2  # unknown producer: accepted


def test_truncation_rolls_producer_state_back() -> None:
    log = open_log(SimStorage())
    for seq in range(4):
        log.append_as_leader(idem(seq), 1)
    log.truncate_to(2)
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader(idem(3), 1)
    assert log.append_as_leader(idem(2), 1).first_offset == 2


def test_log_manager_checkpoints_and_reopen() -> None:
    sim = SimStorage()
    manager = LogManager.open(sim, "/logs", LogConfig(segment_bytes=300))
    a = manager.get_or_create("orders", 0)
    b = manager.get_or_create("pay-ments", 1)
    for i in range(10):
        a.append_as_leader(batch(1, value=b"q" * 40, ts=i), 1)
    b.append_as_leader(batch(3), 2)
    a.update_high_watermark(7)
    b.update_high_watermark(3)
    manager.close()
    assert read_offsets(sim, "/logs/replication-offset-checkpoint") == {("orders", 0): 7, ("pay-ments", 1): 3}
    assert read_offsets(sim, "/logs/recovery-point-offset-checkpoint") == {("orders", 0): 10, ("pay-ments", 1): 3}
    sim.crash()
    manager = LogManager.open(sim, "/logs", LogConfig(segment_bytes=300))
    assert sorted(manager.logs) == [("orders", 0), ("pay-ments", 1)]
    a = manager.logs[("orders", 0)]
    assert (a.log_end_offset, a.high_watermark, a.recovery_point) == (10, 7, 10)
    assert manager.logs[("pay-ments", 1)].epoch_cache.latest_epoch() == 2


def test_a_new_log_survives_a_crash_after_flush_without_epochs() -> None:
    """The first segment's directory entry is made durable by flush (no epoch checkpoint write
    to do it by accident: follower batches with no leader epoch)."""
    sim = SimStorage()
    log = open_log(sim)
    log.append_as_follower(batch(2, base_offset=0, partition_leader_epoch=-1))
    log.flush()
    sim.crash()
    assert open_log(sim).log_end_offset == 2


def test_a_truncation_lowers_the_recovery_point_checkpoint_however_it_was_asked_for() -> None:
    sim = SimStorage()
    manager = LogManager.open(sim, "/logs", LogConfig())
    log = manager.get_or_create("orders", 0)
    for _ in range(10):
        log.append_as_leader(batch(1), 1)
    manager.flush_all()
    assert read_offsets(sim, "/logs/recovery-point-offset-checkpoint") == {("orders", 0): 10}
    log.truncate_to(4)  # directly on the log, as partition/replica does
    assert read_offsets(sim, "/logs/recovery-point-offset-checkpoint") == {("orders", 0): 4}
