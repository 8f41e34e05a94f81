"""The producer: batching (linger.ms, batch.size), idempotence on by default, retries on retriable
errors with a metadata refresh, acks 0/1/all (Kafka's KafkaProducer, with its defaults where they
make sense here).

    client = ClusterClient(Bootstrap.from_cluster_file(Path("kraftlab-data")))
    producer = await Producer.create(client, ProducerConfig(acks=-1))
    future = await producer.send("orders", b"value", key=b"k")   # -> asyncio.Future
    await producer.flush()                                       # every record acknowledged
    metadata = future.result()                                   # RecordMetadata(offset=...)
    await producer.close()

How it works, per partition (`_PartitionSender`):
- `send` appends a record to the partition's open batch; the batch closes when it reaches
  batch.size bytes or linger.ms after its first record. Closing encodes ONE RecordBatch v2 with the
  producer id, epoch and the next base sequence (KIP-98); the bytes never change afterwards, so a
  retry is byte-identical and the leader recognises it as a duplicate.
- Up to max.in.flight.requests.per.connection (5) batches are in flight to the partition leader.
  On a retriable error or a lost connection the sender stops, waits for everything in flight,
  backs off retry.backoff.ms, refreshes metadata and resends EVERY unacknowledged batch from the
  oldest, in sequence order. Idempotence makes this exactly-once per partition: a batch the old
  leader had already replicated is answered with its original offsets, never written twice.
  OUT_OF_ORDER_SEQUENCE_NUMBER is retriable for a batch that has an unacknowledged predecessor
  (the predecessor is being resent), fatal for the oldest one.
- A batch still unacknowledged after delivery.timeout.ms fails with REQUEST_TIMED_OUT.
- Records of a partition are acknowledged in order; `send` waits (backpressure) while a partition
  has `buffer_batches` batches queued.

Partitioning: an explicit partition wins; else a keyed record goes to crc32(key) % partitions,
and unkeyed records stick to one partition until its batch closes (Kafka's sticky partitioner).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
import zlib
from collections import deque
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any

from harness.client.connection import ClientError, ClusterClient
from harness.client.records import RecordTuple, encode_batch
from harness.net.data_protocol import RETRIABLE, ProduceResult

ACKS_ALL = -1
_SEQ_MOD = 1 << 31


@dataclass(frozen=True, slots=True)
class ProducerConfig:
    acks: int = ACKS_ALL  # 0, 1 or -1 (all)
    linger_ms: int = 5  # linger.ms (Kafka 3.x default 0; 4.0 default 5)
    batch_size: int = 16_384  # batch.size, bytes of records per batch
    enable_idempotence: bool = True  # enable.idempotence
    max_in_flight: int = 5  # max.in.flight.requests.per.connection (<= 5 with idempotence)
    delivery_timeout_ms: int = 120_000  # delivery.timeout.ms
    request_timeout_ms: int = 30_000  # request.timeout.ms
    retry_backoff_ms: int = 100  # retry.backoff.ms
    buffer_batches: int = 64  # closed batches queued per partition before send() waits

    def __post_init__(self) -> None:
        if self.acks not in (0, 1, ACKS_ALL):
            raise ValueError("acks must be 0, 1 or -1 (all)")
        if self.enable_idempotence and not 1 <= self.max_in_flight <= 5:
            raise ValueError("idempotence needs max_in_flight in [1, 5] (KIP-98)")
        if self.batch_size < 1 or self.linger_ms < 0 or self.buffer_batches < 1:
            raise ValueError("batch_size >= 1, linger_ms >= 0, buffer_batches >= 1")


@dataclass(frozen=True, slots=True)
class RecordMetadata:
    topic: str
    partition: int
    offset: int  # -1 with acks=0
    leader_epoch: int


class RecordFuture:
    """The outcome of one sent record: `await`able, with asyncio.Future's `done()`, `result()`
    (a RecordMetadata), `exception()` and `add_done_callback(fn)` (called with this object).
    One asyncio future per *batch* backs all its records, so acknowledging a batch costs one
    set_result, not one per record (a profile of `bench produce` showed per-record futures)."""

    __slots__ = ("_batch", "_index", "_topic", "_partition")

    def __init__(self, batch: asyncio.Future[tuple[int, int]], index: int, topic: str,
                 partition: int) -> None:  # fmt: skip
        self._batch = batch
        self._index = index
        self._topic = topic
        self._partition = partition

    def done(self) -> bool:
        return self._batch.done()

    def exception(self) -> BaseException | None:
        return self._batch.exception()

    def result(self) -> RecordMetadata:
        base, epoch = self._batch.result()
        return RecordMetadata(self._topic, self._partition,
                              base + self._index if base >= 0 else -1, epoch)  # fmt: skip

    def add_done_callback(self, fn: Callable[[RecordFuture], Any]) -> None:
        self._batch.add_done_callback(lambda _f: fn(self))

    def __await__(self) -> Generator[Any, None, RecordMetadata]:
        yield from self._batch.__await__()
        return self.result()


@dataclass(slots=True, eq=False)  # identity: `in`/index over pending must not compare bytes
class _Batch:
    data: bytes
    deadline: float  # loop time
    done: asyncio.Future[tuple[int, int]]  # (base offset, leader epoch), shared by its records
    acked: bool = False


@dataclass(slots=True, eq=False)
class _PartitionSender:
    producer: Producer
    topic: str
    partition: int
    records: list[RecordTuple] = field(default_factory=list)
    open_future: asyncio.Future[tuple[int, int]] | None = None
    open_bytes: int = 0
    linger: asyncio.TimerHandle | None = None
    pending: deque[_Batch] = field(default_factory=deque)
    next_send: int = 0
    inflight: int = 0
    recovering: bool = False
    next_sequence: int = 0
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    space: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None

    # --- accumulating -------------------------------------------------------------------------

    def append(self, record: RecordTuple) -> RecordFuture:
        batch_future = self.open_future
        if batch_future is None:
            batch_future = self.open_future = self.producer.loop.create_future()
        future = RecordFuture(batch_future, len(self.records), self.topic, self.partition)
        self.records.append(record)
        value, key = record[0], record[1]
        self.open_bytes += (len(value) if value else 0) + (len(key) if key else 0) + 8
        config = self.producer.config
        if self.open_bytes >= config.batch_size:
            self.close_batch()
        elif self.linger is None:
            self.linger = self.producer.loop.call_later(config.linger_ms / 1000, self.close_batch)
        return future

    def close_batch(self) -> None:
        if self.linger is not None:
            self.linger.cancel()
            self.linger = None
        if not self.records:
            return
        producer = self.producer
        records, self.records = self.records, []
        done, self.open_future = self.open_future, None
        assert done is not None
        self.open_bytes = 0
        if producer.producer_id >= 0:
            data = encode_batch(records, producer.producer_id, producer.producer_epoch,
                                self.next_sequence)
            self.next_sequence = (self.next_sequence + len(records)) % _SEQ_MOD
        else:
            data = encode_batch(records)
        deadline = producer.loop.time() + producer.config.delivery_timeout_ms / 1000
        self.pending.append(_Batch(data, deadline, done))
        producer.batch_closed(self.topic, self.partition)
        self.wake.set()

    # --- sending --------------------------------------------------------------------------------

    async def run(self) -> None:
        producer = self.producer
        config = producer.config
        client = producer.client
        while True:
            if self.recovering:
                if self.inflight:
                    await self._sleep()
                    continue
                await asyncio.sleep(config.retry_backoff_ms / 1000)  # retry.backoff.ms
                with contextlib.suppress(ClientError, OSError, TimeoutError):
                    await client.refresh_metadata([self.topic])  # else: after the next backoff
                self._expire()
                self.recovering = False
                self.next_send = 0  # resend every unacknowledged batch, oldest first
                continue
            if self.next_send < len(self.pending) and self.inflight < config.max_in_flight:
                batch = self.pending[self.next_send]
                try:
                    leader = await client.leader_for(self.topic, self.partition)
                    conn = await client.connection(leader)
                except ClientError as exc:
                    if exc.error not in RETRIABLE:
                        self._fail(batch, exc)
                        continue
                    self.recovering = True
                    continue
                except (OSError, TimeoutError):
                    self.recovering = True
                    continue
                if self.recovering or batch not in self.pending:
                    continue
                future = client.produce_future(conn, self.topic, self.partition, batch.data,
                                               config.acks, config.request_timeout_ms)  # fmt: skip
                self.next_send = self.pending.index(batch) + 1
                self.inflight += 1
                future.add_done_callback(functools.partial(self._on_result, batch))
                continue
            if producer.closing and not self.pending and not self.records:
                return
            await self._sleep()

    async def _sleep(self) -> None:
        self.wake.clear()
        await self.wake.wait()

    def _on_result(self, batch: _Batch, future: asyncio.Future[ProduceResult]) -> None:
        self.inflight -= 1
        self.wake.set()
        exc = future.exception()
        if exc is not None:
            self.recovering = True  # connection lost or no answer: outcome unknown, resend
            return
        result = future.result()
        if batch.acked or batch not in self.pending:
            return
        if result.error == "NONE":
            self._acknowledge(batch, result)
            return
        is_oldest = self.pending[0] is batch
        if result.error in RETRIABLE or (
            result.error == "OUT_OF_ORDER_SEQUENCE_NUMBER" and not is_oldest
        ):
            if result.error == "NOT_LEADER_OR_FOLLOWER":
                self.producer.client.partitions.pop((self.topic, self.partition), None)
            self.recovering = True
            return
        self._fail(batch, ClientError(result.error, result.message))

    def _acknowledge(self, batch: _Batch, result: ProduceResult) -> None:
        batch.acked = True
        if not batch.done.done():
            batch.done.set_result((result.base_offset, result.leader_epoch))
        while self.pending and self.pending[0].acked:
            self.pending.popleft()
            self.next_send = max(0, self.next_send - 1)
        self._maybe_space()

    def _fail(self, batch: _Batch, exc: BaseException) -> None:
        if not batch.done.done():
            batch.done.set_exception(exc)
            batch.done.exception()  # retrieved: a caller that never awaits it gets no warning
        index = self.pending.index(batch)
        del self.pending[index]
        if index < self.next_send:
            self.next_send -= 1
        self._maybe_space()

    def _expire(self) -> None:
        now = self.producer.loop.time()
        for batch in [b for b in self.pending if b.deadline <= now]:
            self._fail(batch, ClientError("REQUEST_TIMED_OUT", "delivery.timeout.ms passed"))

    def _maybe_space(self) -> None:
        if len(self.pending) < self.producer.config.buffer_batches:
            self.space.set()


class Producer:
    """An async producer over a ClusterClient; use `await Producer.create(...)`."""

    def __init__(self, client: ClusterClient, config: ProducerConfig) -> None:
        self.client = client
        self.config = config
        self.loop = asyncio.get_running_loop()
        self.producer_id = -1
        self.producer_epoch = -1
        self.closing = False
        self._senders: dict[tuple[str, int], _PartitionSender] = {}
        self._sticky: dict[str, int] = {}

    @classmethod
    async def create(cls, client: ClusterClient, config: ProducerConfig | None = None) -> Producer:
        producer = cls(client, config or ProducerConfig())
        if producer.config.enable_idempotence:
            # InitProducerId: the broker hands out an id from a block the controller allocated.
            producer.producer_id, producer.producer_epoch = await client.init_producer_id()
        return producer

    def _sender(self, topic: str, partition: int) -> _PartitionSender:
        key = (topic, partition)
        sender = self._senders.get(key)
        if sender is None:
            sender = self._senders[key] = _PartitionSender(self, topic, partition)
            sender.task = self.loop.create_task(sender.run())
        return sender

    async def _partition_for(self, topic: str, key: bytes | None) -> int:
        count = self.client.partition_counts.get(topic) or await self.client.partition_count(topic)
        if key is not None:
            return zlib.crc32(key) % count
        sticky = self._sticky.get(topic)
        if sticky is None or sticky >= count:
            sticky = self._sticky[topic] = 0
        return sticky

    def batch_closed(self, topic: str, partition: int) -> None:
        count = self.client.partition_counts.get(topic)
        if count and self._sticky.get(topic) == partition:
            self._sticky[topic] = (partition + 1) % count

    async def send(self, topic: str, value: bytes | None, key: bytes | None = None,
                   partition: int | None = None,
                   headers: tuple[tuple[str, bytes | None], ...] = ()) -> RecordFuture:  # fmt: skip
        """Queue one record; returns its RecordFuture (awaiting `send` itself only waits for
        buffer space; await the returned future for the RecordMetadata)."""
        if self.closing:
            raise ClientError("INVALID_REQUEST", "the producer is closed")
        if partition is None:
            sticky = self._sticky.get(topic)
            if key is None and sticky is not None and sticky < (
                    self.client.partition_counts.get(topic) or 0):  # fmt: skip
                partition = sticky  # the common case without a coroutine per record
            else:
                partition = await self._partition_for(topic, key)
        sender = self._sender(topic, partition)
        while len(sender.pending) >= self.config.buffer_batches:
            sender.space.clear()
            await sender.space.wait()
        return sender.append((value, key, headers, int(time.time() * 1000)))

    async def flush(self) -> None:
        """Close every open batch and wait until every record sent so far is acknowledged or
        failed (failures stay on their futures)."""
        waits: list[asyncio.Future[Any]] = []
        for sender in self._senders.values():
            sender.close_batch()
            waits += [b.done for b in sender.pending]
        if waits:
            await asyncio.wait(waits)

    def abort(self, error: str = "PRODUCER_ABORTED") -> None:
        """Stop at once without waiting for acknowledgements: every unacknowledged record's
        future fails with ClientError(`error`) and the sender tasks are cancelled. A batch
        already sent may still be written by the broker (its outcome stays unknown); Jepsen
        workloads abort the producer of a retired process this way."""
        self.closing = True
        for sender in self._senders.values():
            if sender.linger is not None:
                sender.linger.cancel()
                sender.linger = None
            futures = [b.done for b in sender.pending]
            if sender.open_future is not None:
                futures.append(sender.open_future)
            for future in futures:
                if not future.done():
                    future.set_exception(ClientError(error, "the producer was aborted"))
                    future.exception()  # retrieved: nobody may be awaiting it
            sender.pending.clear()
            sender.records = []
            sender.open_future = None
            sender.space.set()
            if sender.task is not None:
                sender.task.cancel()

    async def close(self) -> None:
        await self.flush()
        self.closing = True
        for sender in self._senders.values():
            sender.wake.set()
        tasks = [s.task for s in self._senders.values() if s.task is not None]
        if tasks:
            await asyncio.wait(tasks, timeout=5)
        for task in tasks:
            task.cancel()
