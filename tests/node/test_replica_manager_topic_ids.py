"""The broker's replica manager and a partition directory left by a deleted topic, without
processes (KIP-516). Scenario (a stale partition directory, on the node layer): broker 101
hosts t-0 (topic id T1), whose log reaches leader epoch 4 (and, in quorum mode, a fenced epoch
stored in quorum-fenced-epoch-checkpoint). The broker stops; meanwhile `t` is deleted and
re-created (topic id T2, leader epochs from 0). On restart the image it catches up to knows only
T2. Without topic ids the new replica reused `t-0`: in ISR mode the first produce at epoch 0 hit
"append below the log's latest epoch" (the broker crashed), in quorum mode the replica refused
every partition state below the old fenced epoch, forever. Now the old directory is renamed
`t-0.T1-delete` (removed after log.segment.delete.delay.ms) and the replica starts from a fresh
log. A topic deleted while the broker was down and not re-created (a stray log) is deleted the
same way on the first caught-up image."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.runtime.replica_manager import ReplicaManager
from partition.log.checkpoint import PARTITION_METADATA_FILE
from quorum.metadata.errors import Errors
from quorum.metadata.image import MetadataImage
from quorum.metadata.records import (
    NO_LEADER,
    Partition,
    PartitionChange,
    RegisterBroker,
    Topic,
    UnfenceBroker,
)
from tests.node.test_replica_manager_configs import BROKER, DELAY_MS, World, _FakeBroker, _FakeNode


def _restart(tmp_path: Path, *records: Any) -> World:
    """The broker starts again; the first image it sees holds `records`, then its own new
    registration (the offset of which is its broker epoch), so it is caught up at once."""
    w = World.__new__(World)
    w.node = _FakeNode(tmp_path)
    w.node.leader_id, w.node.epoch = 1, 5  # type: ignore[attr-defined]  # the active controller
    broker = _FakeBroker()
    broker.broker_epoch = len(records) + 1
    w.manager = ReplicaManager(w.node, broker)  # type: ignore[arg-type]
    w.image, w.offset, w.answers = MetadataImage(), 0, []
    w.apply(*records, RegisterBroker(BROKER, "incarnation-2", ()),
            UnfenceBroker(BROKER, broker.broker_epoch))  # fmt: skip
    return w


def _host_old_topic(tmp_path: Path, mode: str) -> None:
    """t-0 of topic T1 on broker 101 alone; five leader epochs, a record produced in each; in
    quorum mode the replica was fenced (and stored the fenced epoch) before every new leader."""
    w = World(tmp_path)
    w.node.leader_id, w.node.epoch = 1, 5  # type: ignore[attr-defined]  # the active controller
    try:
        w.apply(UnfenceBroker(BROKER, 1),
                Topic("t", "T1", (("replication.mode", mode),)),
                Partition("T1", 0, (BROKER,), (BROKER,), BROKER))  # fmt: skip
        assert w.produce("t", 10).error is Errors.NONE
        for _ in range(2):
            if mode == "quorum":
                w.apply(PartitionChange("T1", 0, leader=NO_LEADER))
                w.manager._flush()  # the core's position report stores the fenced epoch
            w.apply(PartitionChange("T1", 0, leader=BROKER))
            assert w.produce("t", 10).error is Errors.NONE
        plog = w.manager.log_manager.logs[("t", 0)]
        assert plog.topic_id == "T1" and plog.log_end_offset == 3
        assert plog.epoch_cache.latest_epoch() == (4 if mode == "quorum" else 2)
        if mode == "quorum":
            assert plog.read_fenced_epoch() == 3
    finally:
        w.close()  # the broker stops (clean shutdown: flushed, checkpointed)


@pytest.mark.parametrize("mode", ["isr", "quorum"])
def test_a_topic_recreated_while_down_gets_a_fresh_log_not_the_old_directory(tmp_path: Path, mode: str) -> None:
    _host_old_topic(tmp_path, mode)
    w = _restart(tmp_path, Topic("t", "T2", (("replication.mode", mode),)),
                 Partition("T2", 0, (BROKER,), (BROKER,), BROKER))  # the image knows T2 only
    try:
        r = w.manager.by_name[("t", 0)]
        status = r.core.status()
        assert (status.role, status.leader_id, status.leader_epoch) == ("leader", BROKER, 0)
        answer = w.produce("t", 10)
        assert (answer.error, answer.base_offset) == (Errors.NONE, 0)
        plog = w.manager.log_manager.logs[("t", 0)]
        assert plog.topic_id == "T2"
        assert (plog.log_end_offset, plog.epoch_cache.latest_epoch(), plog.read_fenced_epoch()) == (1, 0, -1)
        data = tmp_path / "data"
        assert (data / "t-0" / PARTITION_METADATA_FILE).read_text() == "version: 0\ntopic_id: T2\n"
        old = data / "t-0.T1-delete"
        assert any(old.glob("*.log")) and (old / PARTITION_METADATA_FILE).read_text().endswith("T1\n")
        w.node.clock_ms += DELAY_MS
        w.manager._on_deletions()
        assert not old.exists() and (data / "t-0").is_dir()
    finally:
        w.close()


def test_a_topic_deleted_while_down_is_deleted_on_the_first_caught_up_image(tmp_path: Path) -> None:
    _host_old_topic(tmp_path, "isr")
    w = _restart(tmp_path)  # T1 is gone from the image; nothing named t exists
    try:
        assert ("t", 0) not in w.manager.log_manager.logs
        data = tmp_path / "data"
        [stray] = [p for p in data.iterdir() if p.name.startswith("t-0.")]
        assert stray.name.endswith("-delete") and not (data / "t-0").exists()
        w.node.clock_ms += DELAY_MS
        w.manager._on_deletions()
        assert not stray.exists()
    finally:
        w.close()
