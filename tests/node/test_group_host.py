"""The broker's group host (harness/runtime/group_host.py) on a real event loop with a fake replica
manager: what it loads, how it appends, in which order completions reach the core, and what an
ambiguous append failure does. No processes; the Kafka-client tests of the same paths are in
tests/kafka/test_groups.py and test_z_groups_failover.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import coordinator as c
from coordinator.records import offset_commit_record
from harness.admin.groups import decode_assignment
from harness.runtime.clock import NodeClock
from harness.runtime.config import NodeConfig
from harness.runtime.group_host import OFFSETS_TOPIC, GroupHost
from partition.log import batch as rb
from partition.replica import ProduceResponse
from quorum.metadata.errors import Errors

PARTITIONS = 3


@dataclass
class FakeLog:
    batches: list[bytes] = field(default_factory=list)  # each with its base offset patched
    log_start_offset: int = 0

    @property
    def log_end_offset(self) -> int:
        return sum(rb.read_header(b).record_count for b in self.batches)

    def append(self, batch: bytes) -> None:
        patched = bytearray(batch)
        rb.patch(patched, 0, self.log_end_offset, 0)
        self.batches.append(bytes(patched))

    def read(self, offset: int, max_bytes: int, max_offset: int | None = None) -> bytes:
        return b"".join(self.batches)  # every batch: the reader skips what it passed


@dataclass
class FakeCore:
    is_leader: bool = True
    leader_epoch: int = 1


@dataclass
class FakeReplica:
    partition: int
    core: FakeCore = field(default_factory=FakeCore)
    log: FakeLog = field(default_factory=FakeLog)


class FakeReplicas:
    """ReplicaManager.by_name and produce: appends go to the fake log; answers wait for the
    test (`complete`)."""

    def __init__(self) -> None:
        self.by_name = {(OFFSETS_TOPIC, p): FakeReplica(p) for p in range(PARTITIONS)}
        self.pending: list[tuple[int, Callable[[ProduceResponse], None]]] = []

    def produce(self, topic: str, partition: int, records: bytes, acks: int, timeout_ms: int,
                callback: Callable[[ProduceResponse], None], *,
                internal_topics_allowed: bool = False) -> None:  # fmt: skip
        assert (topic, acks) == (OFFSETS_TOPIC, -1)
        assert internal_topics_allowed  # the coordinator's own writes to the internal topic
        self.by_name[(topic, partition)].log.append(records)
        self.pending.append((partition, callback))

    def complete(self, index: int, error: Errors = Errors.NONE) -> None:
        _, callback = self.pending[index]
        callback(ProduceResponse(0, error))


@dataclass
class FakeTopic:
    topic_id: str = "offsets-id"


class FakeImage:
    def topic(self, name: str) -> FakeTopic | None:
        return FakeTopic() if name == OFFSETS_TOPIC else None

    def partitions(self, topic_id: str) -> list[int]:
        return list(range(PARTITIONS))


class FakeNode:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.clock = NodeClock(loop)
        self.image = FakeImage()
        self.config = NodeConfig(node_id=101, cluster_id="c", voters={}, admin_listeners={},
                                 metadata_log_dir=Path("/nonexistent"),
                                 offsets_topic_num_partitions=PARTITIONS)  # fmt: skip

    def now_ms(self) -> int:
        return int(self.loop.time() * 1000)

    def wall_ms(self, mono_ms: int) -> int:
        return 1_700_000_000_000 + mono_ms

    def crash(self, exc: BaseException) -> None:
        raise exc


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)  # let call_soon callbacks run (loads, completions)


def group_in(partition: int) -> str:
    return next(f"g{i}" for i in range(1000) if c.partition_for(f"g{i}", PARTITIONS) == partition)


def commit(host: GroupHost, group: str, offset: int, answers: list[Any]) -> None:
    host.call(c.OffsetCommitRequest(host.next_request_id(), 8, group, (c.OffsetCommitTopic(
        "t", (c.OffsetCommitPartition(0, offset),)),)), answers.append)  # fmt: skip


def fetch(host: GroupHost, group: str) -> Any:
    answers: list[Any] = []
    host.call(c.OffsetFetchRequest(host.next_request_id(), 8, (c.OffsetFetchGroup(group),)),
              answers.append)  # fmt: skip
    [answer] = answers
    return answer.groups[0]


def offsets(result: Any) -> dict[tuple[str, int], int]:
    return {(t.name, p.partition_index): p.committed_offset
            for t in result.topics for p in t.partitions}  # fmt: skip


def make_host() -> tuple[GroupHost, FakeReplicas]:
    loop = asyncio.get_running_loop()
    replicas = FakeReplicas()
    host = GroupHost(FakeNode(loop), object(), replicas)  # type: ignore[arg-type]
    return host, replicas


def test_a_new_leader_loads_its_partition_from_the_log() -> None:
    async def run() -> None:
        host, replicas = make_host()
        group = group_in(1)
        record = offset_commit_record(c.OffsetCommitKey(group, "t", 0),
                                      c.OffsetCommitValue(42, "", 1_700_000_000_000))  # fmt: skip
        replicas.by_name[(OFFSETS_TOPIC, 1)].log.append(rb.encode_batch(
            [rb.Record(record.value, record.key)]))  # fmt: skip
        host.on_metadata()
        assert fetch(host, group).error is Errors.COORDINATOR_LOAD_IN_PROGRESS
        await settle()
        assert offsets(fetch(host, group)) == {("t", 0): 42}
        assert host.status()["leading"] == [0, 1, 2]
        replicas.by_name[(OFFSETS_TOPIC, 1)].core.is_leader = False
        host.on_metadata()
        assert fetch(host, group).error is Errors.NOT_COORDINATOR
        host.close()

    asyncio.run(run())


def test_commits_are_answered_in_append_order_once_committed() -> None:
    async def run() -> None:
        host, replicas = make_host()
        host.on_metadata()
        await settle()
        group = group_in(2)
        first: list[Any] = []
        second: list[Any] = []
        commit(host, group, 5, first)
        commit(host, group, 9, second)
        assert len(replicas.pending) == 2 and not first and not second
        replicas.complete(1)  # the later batch first: held until the earlier one completes
        await settle()
        assert not first and not second and offsets(fetch(host, group)) == {}
        replicas.complete(0)
        await settle()
        assert [r.topics[0].partitions[0].error for r in first + second] == [Errors.NONE] * 2
        assert offsets(fetch(host, group)) == {("t", 0): 9}
        host.close()

    asyncio.run(run())


def test_an_ambiguous_append_failure_reloads_the_partition_from_its_log() -> None:
    async def run() -> None:
        host, replicas = make_host()
        host.on_metadata()
        await settle()
        group = group_in(0)
        answers: list[Any] = []
        commit(host, group, 7, answers)
        replicas.complete(0, Errors.REQUEST_TIMED_OUT)  # in the leader's log; may still commit
        await settle()
        # The request is answered as a coordinator change (the client retries) and the core's
        # state is the log's again: the batch is there, so the offset is visible.
        assert answers[0].topics[0].partitions[0].error is Errors.NOT_COORDINATOR
        assert host.reloads == 1
        assert offsets(fetch(host, group)) == {("t", 0): 7}
        host.close()

    asyncio.run(run())


def test_a_failed_append_is_not_visible() -> None:
    async def run() -> None:
        host, replicas = make_host()
        host.on_metadata()
        await settle()
        group = group_in(0)
        answers: list[Any] = []
        commit(host, group, 7, answers)
        replicas.complete(0, Errors.NOT_ENOUGH_REPLICAS)  # refused before the append
        await settle()
        assert answers[0].topics[0].partitions[0].error is Errors.COORDINATOR_NOT_AVAILABLE
        assert host.reloads == 0 and offsets(fetch(host, group)) == {}
        host.close()

    asyncio.run(run())


def test_consumer_protocol_assignments_decode() -> None:
    # ConsumerProtocolAssignment v0: int16 version, [topic, [partition]], user data.
    data = (b"\x00\x00" + b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\x00\x00\x00\x02"
            + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x03" + b"\xff\xff\xff\xff")  # fmt: skip
    assert decode_assignment(data) == [("t", 0), ("t", 3)]
    assert decode_assignment(b"\x00") is None
