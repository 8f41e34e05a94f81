"""The producer's retry rules, against a scripted in-process stand-in for the brokers (no sockets,
no sleeps as synchronisation: each step awaits the producer's own requests).

- a retriable error (or a lost connection) makes the sender resend EVERY unacknowledged batch,
  oldest first, byte-identical (same producer id, epoch and base sequence: KIP-98), after a
  metadata refresh;
- OUT_OF_ORDER_SEQUENCE_NUMBER is retried for a batch whose predecessor is unacknowledged, and
  is fatal for the oldest one (only that batch fails);
- sequences advance by the record count of each batch; acks come back in order;
- delivery.timeout.ms fails a batch that cannot be delivered with REQUEST_TIMED_OUT.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import pytest

from harness.client.connection import ClientError
from harness.client.producer import Producer, ProducerConfig
from harness.net.data_protocol import PartitionMetadata, ProduceResult
from partition.log import batch as rb


@dataclass
class Sent:
    broker: int
    data: bytes
    future: asyncio.Future[ProduceResult]

    @property
    def header(self) -> rb.BatchHeader:
        return rb.validate(self.data)

    @property
    def values(self) -> list[bytes | None]:
        return [r.value for r in rb.decode_records(self.data, self.header)]


@dataclass
class FakeBrokers:
    """Stands in for ClusterClient: records every produce and lets the test answer it."""

    leader: int = 101
    partitions: dict[tuple[str, int], Any] = field(default_factory=dict)
    partition_counts: dict[str, int] = field(default_factory=lambda: {"t": 1})
    sent: list[Sent] = field(default_factory=list)
    refreshes: int = 0
    arrived: asyncio.Event = field(default_factory=asyncio.Event)

    async def init_producer_id(self) -> tuple[int, int]:
        return 42, 0

    async def leader_for(self, topic: str, partition: int) -> int:
        return self.leader

    async def connection(self, broker_id: int) -> int:
        return broker_id

    async def refresh_metadata(self, topics: Any = ()) -> None:
        self.refreshes += 1
        self.partitions[("t", 0)] = PartitionMetadata("t", 0, self.leader, 1, (101, 102), ())

    async def partition_count(self, topic: str) -> int:
        return self.partition_counts[topic]

    def produce_future(self, conn: int, topic: str, partition: int, records: bytes, acks: int,
                       timeout_ms: int) -> asyncio.Future[ProduceResult]:
        future: asyncio.Future[ProduceResult] = asyncio.get_running_loop().create_future()
        self.sent.append(Sent(conn, records, future))
        self.arrived.set()
        return future

    async def wait_sent(self, count: int) -> list[Sent]:
        async with asyncio.timeout(5):
            while len(self.sent) < count:
                self.arrived.clear()
                await self.arrived.wait()
        return self.sent


def run(test: Callable[[], Coroutine[Any, Any, None]]) -> Callable[[], None]:
    """Run an async test on a fresh event loop (the suite has no asyncio plugin)."""

    @functools.wraps(test)
    def wrapper() -> None:
        asyncio.run(test())

    return wrapper


def ok(base: int, count: int, epoch: int = 1) -> ProduceResult:
    return ProduceResult(0, "NONE", base, base + count - 1, epoch)


async def make(fake: FakeBrokers, **config: Any) -> Producer:
    defaults: dict[str, Any] = {"linger_ms": 0, "retry_backoff_ms": 1, "batch_size": 1}
    return await Producer.create(fake, ProducerConfig(**{**defaults, **config}))  # type: ignore[arg-type]


@run
async def test_retriable_error_resends_all_unacked_batches_in_order_byte_identical() -> None:
    fake = FakeBrokers()
    producer = await make(fake)
    futures = [await producer.send("t", f"v{i}".encode(), partition=0) for i in range(3)]
    first = list(await fake.wait_sent(3))  # batch.size 1: one record per batch, 3 in flight
    assert [s.header.base_sequence for s in first] == [0, 1, 2]
    assert {s.header.producer_id for s in first} == {42}
    fake.leader = 102
    first[0].future.set_result(ProduceResult(0, "NOT_LEADER_OR_FOLLOWER", leader_id=102))
    first[1].future.set_exception(ConnectionResetError("broker died"))
    first[2].future.set_result(ProduceResult(0, "OUT_OF_ORDER_SEQUENCE_NUMBER"))
    resent = (await fake.wait_sent(6))[3:]
    assert [s.data for s in resent] == [s.data for s in first]  # byte-identical, same order
    assert [s.broker for s in resent] == [102, 102, 102] and fake.refreshes >= 1
    for i, s in enumerate(resent):
        s.future.set_result(ok(10 + i, 1))
    await producer.flush()
    assert [f.result().offset for f in futures] == [10, 11, 12]
    await producer.close()


@run
async def test_out_of_order_on_the_oldest_batch_is_fatal_for_that_batch_only() -> None:
    fake = FakeBrokers()
    producer = await make(fake)
    a = await producer.send("t", b"a", partition=0)
    b = await producer.send("t", b"b", partition=0)
    sent = await fake.wait_sent(2)
    sent[0].future.set_result(ProduceResult(0, "OUT_OF_ORDER_SEQUENCE_NUMBER"))
    sent[1].future.set_result(ok(7, 1))
    await producer.flush()
    with pytest.raises(ClientError) as failed:
        a.result()
    assert failed.value.error == "OUT_OF_ORDER_SEQUENCE_NUMBER"
    assert b.result().offset == 7
    await producer.close()


@run
async def test_batches_carry_consecutive_sequences_by_record_count() -> None:
    fake = FakeBrokers()
    producer = await make(fake, batch_size=250)  # 108 accounted bytes per record: 3 per batch
    futures = [await producer.send("t", bytes(100), partition=0) for _ in range(5)]
    sent = await fake.wait_sent(2)  # the full batch, then the tail after linger.ms (0)
    assert [s.header.record_count for s in sent] == [3, 2]
    assert [s.header.base_sequence for s in sent] == [0, 3]
    sent[1].future.set_result(ok(3, 2))  # acknowledged out of order: still resolved
    sent[0].future.set_result(ok(0, 3))
    await producer.flush()
    assert [f.result().offset for f in futures] == [0, 1, 2, 3, 4]
    await producer.close()


@run
async def test_delivery_timeout_fails_undeliverable_batches() -> None:
    fake = FakeBrokers()
    producer = await make(fake, delivery_timeout_ms=50)
    future = await producer.send("t", b"x", partition=0)
    attempt = 0
    async with asyncio.timeout(5):
        while not future.done():
            sent = await fake.wait_sent(attempt + 1)
            sent[attempt].future.set_result(ProduceResult(0, "NOT_ENOUGH_REPLICAS"))
            attempt += 1
            await asyncio.sleep(0.01)  # let delivery.timeout.ms pass (the rule under test)
    with pytest.raises(ClientError) as failed:
        future.result()
    assert failed.value.error == "REQUEST_TIMED_OUT"
    await producer.close()
