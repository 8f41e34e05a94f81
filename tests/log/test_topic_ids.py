"""Topic ids in partition directories (KIP-516): `partition.metadata` (version + topic id, written
atomically when a log is created with an id); a directory holding another topic's id (the topic
was deleted and re-created under the same name while this broker was down, or while it hosted no
replica of it) is renamed `<topic>-<partition>.<old id>-delete`, removed after the delete delay,
and a fresh log takes its name, with no leader epochs, fenced epoch, offsets or checkpoint
entries of the old topic; a directory without the file (older layout) adopts the id it is opened
with. Crashing at every storage step of the replacement never lets the new topic see old data."""

from __future__ import annotations

import pytest

from partition.log import batch as rb
from partition.log.checkpoint import (
    PARTITION_METADATA_FILE,
    REPLICATION_CHECKPOINT,
    read_offsets,
    read_partition_metadata,
    write_partition_metadata,
)
from partition.log.config import LogConfig
from partition.log.errors import CheckpointError
from partition.log.manager import LogManager
from partition.log.storage import SimStorage, read_whole
from tests.log.crashpoints import CrashAt, Crashed

DELAY_MS = 2_000


def batch(n: int = 2) -> bytes:
    return rb.encode_batch([rb.Record(b"v" * 20) for _ in range(n)])


def old_topic(sim: SimStorage, topic_id: str | None = "OLD") -> None:
    """t-0 of an old topic: 6 records at leader epochs 0..5, HW 6, fenced epoch 7, flushed and
    checkpointed; then the broker stops (crash after a clean flush)."""
    manager = LogManager.open(sim, "/data", LogConfig(), file_delete_delay_ms=DELAY_MS)
    log = manager.get_or_create("t", 0, topic_id=topic_id)
    for epoch in range(3):
        log.append_as_leader(batch(), epoch * 2 + 1)
    log.update_high_watermark(6)
    log.write_fenced_epoch(7)
    manager.flush_all()
    sim.crash()


def assert_fresh(manager: LogManager, topic_id: str) -> None:
    log = manager.logs[("t", 0)]
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark, log.recovery_point) == (0, 0, 0, 0)
    assert log.epoch_cache.latest_epoch() == -1 and log.read_fenced_epoch() == -1
    assert log.topic_id == topic_id
    assert read_partition_metadata(manager.storage, f"/data/t-0/{PARTITION_METADATA_FILE}") == topic_id
    # The new topic's first leader (epoch 0) appends: not "below the log's latest epoch".
    assert log.append_as_leader(batch(), 0).first_offset == 0


def test_partition_metadata_is_written_on_creation_in_kafkas_format() -> None:
    sim = SimStorage()
    manager = LogManager.open(sim, "/data", LogConfig())
    log = manager.get_or_create("t", 0, topic_id="AbC-_12")
    assert log.topic_id == "AbC-_12"
    assert read_whole(sim, f"/data/t-0/{PARTITION_METADATA_FILE}") == b"version: 0\ntopic_id: AbC-_12\n"
    sim.crash()  # written atomically and fsynced with its directory entry: survives at once
    assert LogManager.open(sim, "/data", LogConfig()).logs[("t", 0)].topic_id == "AbC-_12"
    assert LogManager.open(sim, "/raft", LogConfig()).get_or_create("m", 0).topic_id is None


def test_a_log_opened_at_start_with_another_topic_id_is_set_aside_for_a_fresh_log() -> None:
    sim = SimStorage()
    old_topic(sim)
    manager = LogManager.open(sim, "/data", LogConfig(), now_ms=100, file_delete_delay_ms=DELAY_MS)
    assert manager.logs[("t", 0)].topic_id == "OLD" and manager.logs[("t", 0)].log_end_offset == 6
    manager.get_or_create("t", 0, topic_id="NEW", now_ms=1_000)
    assert_fresh(manager, "NEW")
    assert sorted(sim.list_dir("/data")) == sorted(
        ["t-0", "t-0.OLD-delete", "recovery-point-offset-checkpoint",
         "log-start-offset-checkpoint", "replication-offset-checkpoint"])  # fmt: skip
    assert "quorum-fenced-epoch-checkpoint" in sim.list_dir("/data/t-0.OLD-delete")
    assert read_offsets(sim, f"/data/{REPLICATION_CHECKPOINT}") == {}  # the old HW 6 is gone
    assert manager.pending_deletes == {"t-0.OLD-delete": 1_000 + DELAY_MS}
    assert manager.remove_deleted_logs(1_000 + DELAY_MS - 1) == []
    assert manager.remove_deleted_logs(1_000 + DELAY_MS) == ["t-0.OLD-delete"]
    assert not sim.exists("/data/t-0.OLD-delete")
    manager.flush_all()
    sim.crash()
    reopened = LogManager.open(sim, "/data", LogConfig())
    log = reopened.logs[("t", 0)]
    assert (log.topic_id, log.log_end_offset, log.epoch_cache.latest_epoch()) == ("NEW", 2, 0)


def test_a_closed_directory_of_another_topic_id_is_set_aside_too() -> None:
    """A replica reassigned away leaves its directory closed (not deleted); the topic is then
    deleted and re-created, and this broker is assigned a replica of the new one."""
    sim = SimStorage()
    old_topic(sim)
    manager = LogManager.open(sim, "/data", LogConfig(), file_delete_delay_ms=DELAY_MS)
    manager.logs.pop(("t", 0)).close()  # as ReplicaManager._remove on a reassignment
    manager.get_or_create("t", 0, topic_id="NEW", now_ms=5)
    assert_fresh(manager, "NEW")
    assert manager.pending_deletes == {"t-0.OLD-delete": 5 + DELAY_MS}


def test_the_same_topic_id_keeps_the_log_and_an_older_layout_adopts_the_id() -> None:
    sim = SimStorage()
    old_topic(sim)
    manager = LogManager.open(sim, "/data", LogConfig())
    assert manager.get_or_create("t", 0, topic_id="OLD").log_end_offset == 6
    assert manager.pending_deletes == {}
    legacy = SimStorage()
    old_topic(legacy, topic_id=None)  # written before partition.metadata existed
    assert not legacy.exists(f"/data/t-0/{PARTITION_METADATA_FILE}")
    for opened_at_start in (True, False):
        manager = LogManager.open(legacy, "/data", LogConfig())
        if not opened_at_start:
            manager.logs.pop(("t", 0)).close()
        log = manager.get_or_create("t", 0, topic_id="CURRENT")
        assert (log.log_end_offset, log.topic_id, manager.pending_deletes) == (6, "CURRENT", {})
        assert read_partition_metadata(legacy, f"/data/t-0/{PARTITION_METADATA_FILE}") == "CURRENT"
        manager.close()


def test_a_leftover_with_the_same_name_is_never_overwritten() -> None:
    sim = SimStorage()
    sim.make_dirs("/data/t-0.OLD-delete")
    old_topic(sim)
    manager = LogManager.open(sim, "/data", LogConfig(), now_ms=0, file_delete_delay_ms=DELAY_MS)
    manager.get_or_create("t", 0, topic_id="NEW", now_ms=0)
    assert set(manager.pending_deletes) == {"t-0.OLD-delete", "t-0.OLD.1-delete"}
    assert any(n.endswith(".log") for n in sim.list_dir("/data/t-0.OLD.1-delete"))


@pytest.mark.parametrize("text", [
    b"version: 1\ntopic_id: X\n", b"topic_id: X\n", b"version: 0\ntopic_id: \n",
    b"version: 0\ntopic: X\n", b"version: 0\ntopic_id: X\nextra\n", b"\xff",
])  # fmt: skip
def test_a_malformed_partition_metadata_file_is_a_storage_error(text: bytes) -> None:
    sim = SimStorage()
    sim.make_dirs("/d")
    handle = sim.open(f"/d/{PARTITION_METADATA_FILE}")
    handle.append(text)
    with pytest.raises(CheckpointError) as info:
        read_partition_metadata(sim, f"/d/{PARTITION_METADATA_FILE}")
    assert info.value.error_name == "KAFKA_STORAGE_ERROR"


def test_a_topic_id_with_whitespace_is_refused() -> None:
    with pytest.raises(ValueError, match="topic id"):
        write_partition_metadata(SimStorage(), "/x", "a b")


def test_crashing_at_every_step_of_the_replacement_never_exposes_old_data() -> None:
    steps = None
    crash_at = 0
    while steps is None or crash_at <= steps:
        sim = SimStorage()
        old_topic(sim)
        wrapped = CrashAt(sim, crash_at)
        manager = LogManager.open(wrapped, "/data", LogConfig(), file_delete_delay_ms=DELAY_MS)
        try:
            manager.get_or_create("t", 0, topic_id="NEW", now_ms=0).append_as_leader(batch(), 0)
            manager.flush_all()
            steps = len(wrapped.steps)
        except Crashed:
            pass
        sim.crash()
        again = LogManager.open(sim, "/data", LogConfig(), file_delete_delay_ms=DELAY_MS)
        log = again.get_or_create("t", 0, topic_id="NEW")
        assert log.topic_id == "NEW" and log.epoch_cache.latest_epoch() in (-1, 0), crash_at
        assert log.log_end_offset in (0, 2) and log.read_fenced_epoch() == -1, crash_at
        old = [n for n in sim.list_dir("/data") if n.startswith("t-0.OLD")]
        assert old == ["t-0.OLD-delete"], (crash_at, old)  # the old data is kept aside, once
        crash_at += 1
    assert steps is not None and steps > 5
