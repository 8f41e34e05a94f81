"""The broker's replica manager applying topic configs to its logs, without processes: a topic's
segment.bytes reaches the log at creation; a Config record changing segment.bytes or
max.message.bytes on the live topic applies to the open log and the core at once (dynamic topic
config); a deleted topic's directory is renamed `<topic>-<partition>.<uuid>-delete` at once and
removed when log.segment.delete.delay.ms has passed; a leftover `-delete` directory found at start
is removed the same delay later. Time is driven by hand (the fake node's clock)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

import pytest

from harness.runtime.clock import NodeClock
from harness.runtime.config import NodeConfig
from harness.runtime.replica_manager import ReplicaManager
from partition.log import batch as rb
from partition.replica import ProduceResponse
from quorum.metadata.errors import Errors
from quorum.metadata.image import MetadataImage
from quorum.metadata.records import Config, Partition, RegisterBroker, RemoveTopic, Topic

BROKER = 101
DELAY_MS = 5_000


class _Session:
    registered = True


class _FakeBroker:
    broker_epoch = 1  # World registers BROKER first: its RegisterBroker is at offset 1
    session = _Session()

    def send_controller(self, request: Any, callback: Any) -> None:
        pass


class _FakeTransport:
    def learn_peer(self, node_id: int, address: Any) -> None:
        pass


class _FakeNode:
    def __init__(self, data_dir: Path) -> None:
        self.node_id = BROKER
        self.loop = asyncio.new_event_loop()
        self.config = NodeConfig(node_id=BROKER, cluster_id="c", voters={}, admin_listeners={},
                                 metadata_log_dir=data_dir, process_roles="broker",
                                 log_segment_delete_delay_ms=DELAY_MS)  # fmt: skip
        self.transport = _FakeTransport()
        self.clock_ms = 1_000_000
        self.clock = NodeClock(self.loop)  # arms the cores' timers (the readings are clock_ms)

    def now_ms(self) -> int:
        return self.clock_ms

    def wall_ms(self, mono_ms: int) -> int:
        return mono_ms

    def send(self, to: int, message: Any) -> None:
        pass

    def crash(self, exc: BaseException) -> NoReturn:
        raise exc


class World:
    def __init__(self, data_dir: Path) -> None:
        self.node = _FakeNode(data_dir)
        self.manager = ReplicaManager(self.node, _FakeBroker())  # type: ignore[arg-type]
        self.image = MetadataImage()
        self.offset = 0
        self.answers: list[ProduceResponse] = []
        # The replica manager acts only once the image reached our registration (catch-up).
        self.apply(RegisterBroker(BROKER, "incarnation", ()))

    def apply(self, *records: Any) -> None:
        for record in records:
            self.offset += 1
            self.image.apply_record(self.offset, 1, record)
        self.manager.on_metadata(self.image)

    def produce(self, topic: str, value_bytes: int) -> ProduceResponse:
        data = rb.encode_batch([rb.Record(b"v" * value_bytes)])
        self.manager.produce(topic, 0, data, 1, 30_000, self.answers.append)
        return self.answers[-1]

    def close(self) -> None:
        self.manager.close()
        self.node.loop.close()


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    w = World(tmp_path)
    yield w
    w.close()


def create(w: World, name: str, topic_id: str, **configs: str) -> None:
    pairs = tuple(sorted((k.replace("_", "."), v) for k, v in configs.items()))
    w.apply(Topic(name, topic_id, pairs), Partition(topic_id, 0, (BROKER,), (BROKER,), BROKER))


def test_topic_configs_reach_the_log_and_changes_apply_to_the_open_log(world: World) -> None:
    create(world, "t", "T1", segment_bytes="300")
    plog = world.manager.log_manager.logs[("t", 0)]
    assert plog.config.segment_bytes == 300 and plog.config.retention_ms == 168 * 3600 * 1000
    for _ in range(4):
        assert world.produce("t", 100).error is Errors.NONE  # ~170-byte batches: one per segment
    assert len(plog.segments) == 4
    world.apply(Config("topic", "t", "segment.bytes", "100000"),
                Config("topic", "t", "max.message.bytes", "150"))  # fmt: skip
    assert plog.config.segment_bytes == 100_000 and plog.config.max_message_bytes == 150
    assert world.manager.by_name[("t", 0)].core.config.max_message_bytes == 150
    too_large = world.produce("t", 100)
    assert too_large.error is Errors.MESSAGE_TOO_LARGE and plog.log_end_offset == 4
    for _ in range(3):
        assert world.produce("t", 10).error is Errors.NONE
    assert len(plog.segments) == 4  # at 300 bytes this would have rolled
    world.apply(Config("topic", "t", "max.message.bytes", None))  # back to the default
    assert world.produce("t", 100).error is Errors.NONE


def test_a_deleted_topics_directory_is_renamed_then_removed_after_the_delay(world: World, tmp_path: Path) -> None:
    create(world, "gone", "G1")
    world.produce("gone", 10)
    data = tmp_path / "data"
    assert (data / "gone-0").is_dir()
    world.apply(RemoveTopic("G1"))
    [renamed] = [p for p in data.iterdir() if p.name.startswith("gone-0.")]
    assert renamed.name.endswith("-delete") and len(renamed.name) == len("gone-0.") + 32 + 7
    assert not (data / "gone-0").exists() and any(renamed.glob("*.log"))
    world.node.clock_ms += DELAY_MS - 1
    world.manager._on_deletions()
    assert renamed.exists()
    world.node.clock_ms += 1
    world.manager._on_deletions()
    assert not renamed.exists()
    create(world, "gone", "G2")  # the same name again: a fresh, empty log
    assert world.manager.log_manager.logs[("gone", 0)].log_end_offset == 0


def test_a_leftover_delete_directory_is_removed_after_a_restart(tmp_path: Path) -> None:
    first = World(tmp_path)
    create(first, "gone", "G1")
    first.produce("gone", 10)
    first.apply(RemoveTopic("G1"))
    first.close()  # the broker stops before the delay ran out
    [renamed] = [p for p in (tmp_path / "data").iterdir() if p.name.endswith("-delete")]
    second = World(tmp_path)
    try:
        assert second.manager.log_manager.logs == {}
        assert list(second.manager.log_manager.pending_deletes.values()) == [1_000_000 + DELAY_MS]
        second.node.clock_ms += DELAY_MS
        second.manager._on_deletions()
        assert not renamed.exists()
    finally:
        second.close()
