"""Topic configs reaching a partition log: LogConfig.from_topic_configs (names, precedence over the
broker defaults, Long.MAX_VALUE as "never", bad values), a config changed on an open log
(LogManager.set_config: the next append rolls at the new segment.bytes, the next retention check
uses the new limits), retention advancing the log start but never past the HW nor into the active
segment, max.message.bytes on leader appends, and a deleted topic's directory: renamed to
`<topic>-<partition>.<id>-delete` at once, removed after file.delete.delay.ms, also when it is found
left over on open."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from partition.log import batch as rb
from partition.log.checkpoint import read_offsets
from partition.log.config import DAY_MS, LogConfig
from partition.log.errors import OffsetOutOfRangeError, RecordTooLargeError
from partition.log.manager import LogManager
from partition.log.storage import SimStorage, StorageError


def batch(n: int = 2, ts: int = 0, size: int = 40) -> bytes:
    return rb.encode_batch([rb.Record(b"z" * size, timestamp_ms=ts) for _ in range(n)])


BATCH_BYTES = len(batch())


def test_from_topic_configs_applies_the_log_keys_over_the_defaults() -> None:
    broker = LogConfig(segment_bytes=5000, retention_ms=60_000, flush_messages=10)
    config = LogConfig.from_topic_configs(
        {"segment.bytes": "1000", "retention.bytes": "4000", "segment.ms": "500",
         "flush.ms": "250", "max.message.bytes": "900", "cleanup.policy": "delete",
         "min.insync.replicas": "2"}, broker)  # fmt: skip
    assert (config.segment_bytes, config.segment_ms, config.retention_ms, config.retention_bytes) == (
        1000, 500, 60_000, 4000)  # retention.ms: the broker's (no topic override)
    assert (config.flush_messages, config.flush_ms, config.max_message_bytes) == (10, 250, 900)
    never = LogConfig.from_topic_configs({"flush.messages": str(2**63 - 1), "flush.ms": str(2**63 - 1)},
                                         broker)  # fmt: skip
    assert never.flush_messages is None and never.flush_ms is None
    assert LogConfig.from_topic_configs({}, broker) is broker
    assert LogConfig.from_topic_configs({}).segment_ms == 7 * DAY_MS


@pytest.mark.parametrize(("name", "value", "message"), [
    ("segment.bytes", "13", "segment.bytes must be >= 14"),
    ("segment.bytes", "big", "segment.bytes must be an integer"),
    ("flush.messages", "0", "flush.messages must be >= 1"),
    ("cleanup.policy", "compact", "only 'delete'"),
])  # fmt: skip
def test_bad_topic_log_configs_are_refused_naming_the_key(name: str, value: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        LogConfig.from_topic_configs({name: value})


def test_a_config_change_reaches_the_open_log_and_rolls_at_the_new_segment_bytes() -> None:
    sim = SimStorage()
    manager = LogManager.open(sim, "/data", LogConfig())
    log = manager.get_or_create("orders", 0)
    for _ in range(3):
        log.append_as_leader(batch(), 1)
    assert len(log.segments) == 1  # 1 GiB segments by default
    manager.set_config("orders", 0, LogConfig.from_topic_configs({"segment.bytes": str(2 * BATCH_BYTES)}))
    for _ in range(4):
        log.append_as_leader(batch(), 1)
    # The active segment holds 3 batches (over the new size): the next append rolls, then every
    # second one does.
    assert [s.base_offset for s in log.segments] == [0, 6, 10]
    assert all(s.size <= 2 * BATCH_BYTES for s in log.segments[1:])


def test_retention_bytes_from_topic_configs_advances_the_log_start_up_to_the_high_watermark() -> None:
    sim = SimStorage()
    manager = LogManager.open(sim, "/data", LogConfig())
    config = LogConfig.from_topic_configs({"segment.bytes": str(BATCH_BYTES),
                                           "retention.bytes": str(3 * BATCH_BYTES)})  # fmt: skip
    log = manager.get_or_create("orders", 0, config)
    for i in range(10):
        log.append_as_leader(batch(ts=i), 1)  # one batch (2 records) per segment
    assert len(log.segments) == 10 and log.log_end_offset == 20
    log.update_high_watermark(8)  # segments [0..3] are wholly below the HW
    assert log.apply_retention(now_ms=0) == 4
    assert log.log_start_offset == 8  # never past the HW, whatever retention.bytes says
    log.update_high_watermark(20)
    assert log.apply_retention(now_ms=0) == 3
    # Three segments left (>= retention.bytes); the active one is never deleted.
    assert log.log_start_offset == 14 and [s.base_offset for s in log.segments] == [14, 16, 18]
    with pytest.raises(OffsetOutOfRangeError):
        log.read(13, 100)
    manager.checkpoint()
    assert read_offsets(sim, "/data/log-start-offset-checkpoint")[("orders", 0)] == 14
    manager.close()
    reopened = LogManager.open(sim, "/data", config).logs[("orders", 0)]
    assert (reopened.log_start_offset, reopened.log_end_offset) == (14, 20)


def test_retention_ms_from_topic_configs_deletes_old_segments_never_the_active_one() -> None:
    log = LogManager.open(SimStorage(), "/data").get_or_create("orders", 0, LogConfig.from_topic_configs(
        {"segment.bytes": str(BATCH_BYTES), "retention.ms": "1000"}))  # fmt: skip
    for ts in (0, 500, 2000, 2500):
        log.append_as_leader(batch(ts=ts), 1)
    log.update_high_watermark(log.log_end_offset)
    assert log.apply_retention(now_ms=2200) == 2  # max timestamps 0 and 500 are > 1000 ms old
    assert log.log_start_offset == 4
    assert log.apply_retention(now_ms=10**9) == 1  # everything expired: the active segment stays
    assert [s.base_offset for s in log.segments] == [6] and log.log_start_offset == 6


def test_max_message_bytes_refuses_a_larger_leader_batch_and_writes_nothing() -> None:
    log = LogManager.open(SimStorage(), "/data").get_or_create("orders", 0, LogConfig.from_topic_configs(
        {"max.message.bytes": str(BATCH_BYTES)}))  # fmt: skip
    log.append_as_leader(batch(), 1)
    with pytest.raises(RecordTooLargeError) as info:
        log.append_as_leader(batch(3), 1)
    assert info.value.error_name == "MESSAGE_TOO_LARGE"
    assert log.log_end_offset == 2 and log.size_bytes == BATCH_BYTES
    log.append_as_follower(rb.encode_batch([rb.Record(b"z" * 40)] * 3, base_offset=2,
                                           partition_leader_epoch=1))  # fmt: skip
    assert log.log_end_offset == 5  # replication never refuses what a leader accepted


def test_a_deleted_log_is_renamed_at_once_and_removed_after_the_delay() -> None:
    sim = SimStorage()
    manager = LogManager.open(sim, "/data", LogConfig(segment_bytes=BATCH_BYTES), now_ms=0,
                              file_delete_delay_ms=60_000)  # fmt: skip
    log = manager.get_or_create("orders", 0)
    manager.get_or_create("orders", 1).append_as_leader(batch(), 1)
    for _ in range(3):
        log.append_as_leader(batch(), 1)
    name = manager.delete_log("orders", 0, "0f3c", now_ms=1_000)
    assert name == "orders-0.0f3c-delete"
    assert sorted(sim.list_dir("/data")) == sorted([
        "orders-0.0f3c-delete", "orders-1", "log-start-offset-checkpoint",
        "recovery-point-offset-checkpoint", "replication-offset-checkpoint"])  # fmt: skip
    assert ("orders", 0) not in read_offsets(sim, "/data/recovery-point-offset-checkpoint")
    assert len([n for n in sim.list_dir("/data/orders-0.0f3c-delete") if n.endswith(".log")]) == 3
    sim.crash()  # the rename was made durable
    assert "orders-0.0f3c-delete" in sim.list_dir("/data")
    assert manager.remove_deleted_logs(60_999) == []
    assert manager.next_delete_due_ms() == 61_000
    assert manager.remove_deleted_logs(61_000) == ["orders-0.0f3c-delete"]
    assert "orders-0.0f3c-delete" not in sim.list_dir("/data") and "orders-1" in sim.list_dir("/data")
    assert manager.next_delete_due_ms() is None


def test_a_leftover_delete_directory_is_removed_after_the_delay_on_the_next_start() -> None:
    sim = SimStorage()
    manager = LogManager.open(sim, "/data", LogConfig())
    manager.get_or_create("orders", 0).append_as_leader(batch(), 1)
    manager.get_or_create("orders", 1).append_as_leader(batch(), 1)
    manager.delete_log("orders", 0, "ab12", now_ms=0)
    sim.crash()  # the broker dies before the delay ran out
    reopened = LogManager.open(sim, "/data", LogConfig(), now_ms=500_000, file_delete_delay_ms=2_000)
    assert set(reopened.logs) == {("orders", 1)}  # a -delete directory is never opened as a log
    assert reopened.pending_deletes == {"orders-0.ab12-delete": 502_000}
    assert reopened.remove_deleted_logs(501_999) == []
    assert reopened.remove_deleted_logs(502_000) == ["orders-0.ab12-delete"]
    assert not sim.exists("/data/orders-0.ab12-delete")


def test_sim_storage_renames_and_removes_directories() -> None:
    sim = SimStorage()
    sim.make_dirs("/d/a")
    f = sim.open("/d/a/x")
    f.append(b"abc")
    f.fsync()
    sim.fsync_dir("/d/a")
    sim.rename("/d/a", "/d/b")
    assert sim.list_dir("/d") == ["b"] and sim.list_dir("/d/b") == ["x"]
    sim.crash()
    assert sim.open("/d/b/x", create=False).read(0, 3) == b"abc"
    with pytest.raises(StorageError, match="not empty"):
        sim.remove_dir("/d/b")
    sim.remove("/d/b/x")
    sim.remove_dir("/d/b")
    assert sim.list_dir("/d") == []


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 120), min_size=1, max_size=25),
    segment_batches=st.integers(1, 4),
    retention_bytes=st.integers(-1, 2000),
    retention_ms=st.integers(-1, 3000),
    hw_fraction=st.floats(0, 1),
    now_ms=st.integers(0, 5000),
)
def test_retention_never_passes_the_high_watermark_nor_touches_the_active_segment(
    sizes: list[int], segment_batches: int, retention_bytes: int, retention_ms: int,
    hw_fraction: float, now_ms: int,
) -> None:  # fmt: skip
    log = LogManager.open(SimStorage(), "/data").get_or_create("orders", 0, LogConfig.from_topic_configs(
        {"segment.bytes": str(segment_batches * 200), "retention.bytes": str(retention_bytes),
         "retention.ms": str(retention_ms)}))  # fmt: skip
    for i, size in enumerate(sizes):
        log.append_as_leader(batch(1, ts=100 * i, size=size), 1)
    hw = log.update_high_watermark(int(hw_fraction * log.log_end_offset))
    before = [(s.base_offset, s.size, s.max_timestamp_ms) for s in log.segments]
    active = before[-1]
    deleted = log.apply_retention(now_ms)
    after = [(s.base_offset, s.size, s.max_timestamp_ms) for s in log.segments]
    assert after == before[deleted:] and after[-1] == active  # a prefix, never the active one
    assert log.log_start_offset == after[0][0] <= hw or deleted == 0
    assert log.high_watermark == hw and log.log_end_offset == len(sizes)
    for i, (_base, size, max_ts) in enumerate(before[:deleted]):
        next_base = before[i + 1][0]
        assert next_base <= hw  # wholly below the HW
        by_time = retention_ms >= 0 and now_ms - max_ts > retention_ms
        by_bytes = retention_bytes >= 0 and sum(s[1] for s in before[i:]) - size >= retention_bytes
        assert by_time or by_bytes
    if retention_bytes >= 0 and deleted:
        assert sum(s[1] for s in after) >= retention_bytes or all(
            now_ms - s[2] > retention_ms >= 0 for s in before[:deleted])  # fmt: skip
