"""The queue workload's clients for Apache Kafka, and the topic admin it needs there.

harness/client speaks kraftlab's native data protocol (msgpack frames to the brokers' RPC
listeners), not the Kafka protocol, so it cannot talk to Apache Kafka. These adapters give
the workload (harness/jepsen/workload_queue.py) the same shapes over the Kafka protocol, with
aiokafka (asyncio, so the workload's `asyncio.timeout` bounds every call as it does with
harness/client):

- `KafkaProducerClient`: `create(bootstrap, ProducerConfig)`, `send(topic, value,
  partition=)` -> an awaitable of `RecordMetadata` (offset -1 with acks=0), `abort()`;
  acks, enable.idempotence, linger.ms, request.timeout.ms, retry.backoff.ms and batch.size as
  the config says (aiokafka has no delivery.timeout.ms: a batch expires after
  request.timeout.ms in its accumulator);
- `KafkaConsumerClient`: `assign(topic, partition, offset)` (no I/O: the consumer starts on the
  first poll, within the poll's own timeout), `poll()` -> `ConsumerRecord`s, `position`,
  `high_watermarks` (from the fetch answers), `close()`; no group (`group.id` unset), no
  auto commit, `auto.offset.reset` as configured;
- errors as harness/client raises them: `ClientError(error=NAME)` with Kafka's error name
  (`OffsetOutOfRange` for OFFSET_OUT_OF_RANGE with auto.offset.reset=none).

What "sent" means is the same as with harness/client, and the workload's outcome rules hold
unchanged: `send` raising means the record never reached the producer's accumulator (not
written); once `send` returned, an error or a timeout leaves the write unknown (aiokafka retries
a batch until it expires; an idempotent producer's retries are deduplicated by the broker,
KIP-98). A resolved future carries the offset the partition leader assigned.

Topic admin (`create_topic`, `describe_topic`) is one blocking Kafka connection per call
(harness/kafka/wire.py): CreateTopics and Metadata through any running broker (a broker
forwards CreateTopics to the active controller, KIP-590).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Generator, Sequence
from typing import Any

from harness.client import (
    ClientError,
    ConsumerConfig,
    ConsumerRecord,
    OffsetOutOfRange,
    ProducerConfig,
    RecordMetadata,
)
from harness.kafka.wire import Wire

CLIENT_ID = "kraftlab-jepsen"
CLOSE_TIMEOUT_S = 5.0  # a stopping client's own bound (it may wait for an expiring batch)
ADMIN_TIMEOUT_S = 1.0  # one admin connection's socket timeout
# Kafka's error codes the setup tells apart (org.apache.kafka.common.protocol.Errors)
TOPIC_ALREADY_EXISTS = 36
INVALID_REPLICATION_FACTOR = 38

# aiokafka logs every retry (a dead leader: hundreds a second) at WARNING; with no logging set
# up, Python's last-resort handler would print them all on the run's stderr. A program that
# configures logging still gets them.
logging.getLogger("aiokafka").addHandler(logging.NullHandler())


def error_name(exc: BaseException) -> str:
    """Kafka's name of the error (aiokafka's broker errors carry it as `message`)."""
    name = getattr(type(exc), "message", None)
    if isinstance(name, str) and name.isupper():
        return name
    if type(exc).__name__ == "KafkaTimeoutError":
        return "REQUEST_TIMED_OUT"
    return type(exc).__name__


def _kafka_errors() -> tuple[type[BaseException], ...]:
    from aiokafka.errors import KafkaError

    return (KafkaError,)


class _Delivery:
    """One sent record's outcome: awaiting it gives its RecordMetadata or raises ClientError.
    The aiokafka future is shielded: a caller's timeout leaves the delivery going on (as
    harness/client's RecordFuture)."""

    def __init__(self, future: asyncio.Future[Any]) -> None:
        self._future = future

    def __await__(self) -> Generator[Any, None, RecordMetadata]:
        return self._wait().__await__()

    async def _wait(self) -> RecordMetadata:
        try:
            meta = await asyncio.shield(self._future)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if self._future.cancelled() and task is not None and not task.cancelling():
                # the producer gave the record up (it was stopped), not our caller
                raise ClientError("CANCELLED", "the producer dropped the record") from None
            raise
        except _kafka_errors() as exc:
            raise ClientError(error_name(exc), str(exc)) from exc
        return RecordMetadata(meta.topic, meta.partition, meta.offset, -1)


def _closing(stop: Awaitable[Any]) -> asyncio.Task[Any]:
    """A client's stop as a task of its own, bounded, whose failure is nobody's concern: the
    client is retired and its outcome no longer recorded."""

    async def bounded() -> None:
        with contextlib.suppress(Exception):
            async with asyncio.timeout(CLOSE_TIMEOUT_S):
                await stop

    return asyncio.ensure_future(bounded())


class KafkaProducerClient:
    """An aiokafka producer with harness/client's Producer shape (module docstring)."""

    def __init__(self, producer: Any) -> None:
        self._producer = producer
        self._stopping: asyncio.Task[Any] | None = None

    @classmethod
    async def create(cls, bootstrap: str, config: ProducerConfig) -> KafkaProducerClient:
        from aiokafka import AIOKafkaProducer

        producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            client_id=CLIENT_ID,
            acks="all" if config.acks == -1 else config.acks,
            enable_idempotence=config.enable_idempotence,
            linger_ms=config.linger_ms,
            max_batch_size=config.batch_size,
            request_timeout_ms=config.request_timeout_ms,
            retry_backoff_ms=config.retry_backoff_ms,
        )
        try:
            await producer.start()
        except BaseException as exc:
            _closing(producer.stop())
            if isinstance(exc, _kafka_errors()):
                raise ClientError(error_name(exc), str(exc)) from exc
            raise
        return cls(producer)

    async def send(self, topic: str, value: bytes, key: bytes | None = None,
                   partition: int | None = None) -> _Delivery:  # fmt: skip
        """Queue one record; raises ClientError if it was not queued."""
        if self._stopping is not None:
            raise ClientError("PRODUCER_CLOSED", "the producer was aborted")
        try:
            future = await self._producer.send(topic, value, key=key, partition=partition)
        except _kafka_errors() as exc:
            raise ClientError(error_name(exc), str(exc)) from exc
        return _Delivery(future)

    def abort(self) -> None:
        """Stop the producer in the background (idempotent); `closed()` waits for it."""
        if self._stopping is None:
            self._stopping = _closing(self._producer.stop())

    async def closed(self) -> None:
        self.abort()
        assert self._stopping is not None
        await self._stopping


class KafkaConsumerClient:
    """An aiokafka consumer without a group, with harness/client's Consumer shape."""

    def __init__(self, bootstrap: str, config: ConsumerConfig) -> None:
        self.bootstrap = bootstrap
        self.config = config
        self._positions: dict[tuple[str, int], int] = {}
        self._consumer: Any = None
        self._assigned = False  # the consumer's assignment matches _positions

    async def assign(self, topic: str, partition: int, offset: int) -> None:
        """Read `partition` from `offset` (applied on the next poll)."""
        self._positions[(topic, partition)] = offset
        self._assigned = False

    def position(self, topic: str, partition: int) -> int | None:
        return self._positions.get((topic, partition))

    @property
    def high_watermarks(self) -> dict[tuple[str, int], int]:
        if self._consumer is None or not self._assigned:
            return {}
        from aiokafka import TopicPartition

        out = {}
        for topic, partition in self._positions:
            hw = self._consumer.highwater(TopicPartition(topic, partition))
            if hw is not None:
                out[(topic, partition)] = hw
        return out

    async def _started(self) -> Any:
        if self._consumer is None:
            from aiokafka import AIOKafkaConsumer

            consumer = AIOKafkaConsumer(
                bootstrap_servers=self.bootstrap,
                client_id=CLIENT_ID,
                group_id=None,
                enable_auto_commit=False,
                auto_offset_reset=self.config.auto_offset_reset,
                fetch_max_wait_ms=self.config.max_wait_ms,
                max_partition_fetch_bytes=self.config.max_bytes,
                request_timeout_ms=self.config.request_timeout_ms,
            )
            try:
                await consumer.start()
            except BaseException:
                _closing(consumer.stop())
                raise
            self._consumer = consumer
        if not self._assigned:
            from aiokafka import TopicPartition

            tps = {key: TopicPartition(*key) for key in self._positions}
            self._consumer.assign(list(tps.values()))
            for key, tp in tps.items():
                self._consumer.seek(tp, self._positions[key])
            self._assigned = True
        return self._consumer

    async def poll(self) -> Sequence[ConsumerRecord]:
        """What the assigned partitions hold from their positions (long-polls up to
        fetch.max.wait.ms when there is nothing); raises ClientError / OffsetOutOfRange."""
        from aiokafka.errors import OffsetOutOfRangeError

        try:
            consumer = await self._started()
            batches = await consumer.getmany(timeout_ms=self.config.max_wait_ms)
        except OffsetOutOfRangeError as exc:
            offsets = exc.args[0] if exc.args and isinstance(exc.args[0], dict) else {}
            if not offsets:
                raise ClientError("OFFSET_OUT_OF_RANGE", str(exc)) from exc
            tp, position = next(iter(offsets.items()))
            raise OffsetOutOfRange(tp.topic, tp.partition, position, -1, -1) from exc
        except _kafka_errors() as exc:
            raise ClientError(error_name(exc), str(exc)) from exc
        records = []
        for tp, rows in batches.items():
            for r in rows:
                records.append(
                    ConsumerRecord(
                        tp.topic,
                        tp.partition,
                        r.offset,
                        r.key,
                        r.value,
                        tuple(r.headers or ()),
                        r.timestamp,
                        -1,
                    )
                )
                self._positions[(tp.topic, tp.partition)] = r.offset + 1
        return records

    async def close(self) -> None:
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            await _closing(consumer.stop())


# ------------------------------------------------------------------------------ topic admin


def create_topic(
    port: int,
    topic: str,
    partitions: int,
    replication_factor: int,
    configs: dict[str, str],
    host: str = "127.0.0.1",
) -> tuple[int, str | None]:
    """CreateTopics v5 of one topic through the broker at host:port: (error code, message)."""
    from kafka.protocol.admin import CreateTopicsRequest  # type: ignore[import-untyped]

    cls = CreateTopicsRequest[5]
    topic_cls = cls.CreatableTopic
    request = cls(topics=[topic_cls(
        name=topic, num_partitions=partitions, replication_factor=replication_factor,
        assignments=[], configs=[topic_cls.CreatableTopicConfig(name=k, value=v)
                                 for k, v in configs.items()])],
        timeout_ms=10_000, validate_only=False)  # fmt: skip
    with Wire(port, ADMIN_TIMEOUT_S * 10, host) as wire:
        answer = wire.call(request).topics[0]
    return answer.error_code, answer.error_message


def describe_topic(brokers: Sequence[tuple[str, int]], topic: str) -> dict[str, Any] | None:
    """The topic as the brokers at `brokers` (host, port) describe it, in the admin API's shape
    ({"name", "partitions": [{"partition", "leader", "leader_epoch", "replicas", "isr"}]}):
    per partition the answer with the highest leader epoch among the brokers that answered
    (a broker's metadata image may lag the controller's; a higher leader epoch is newer).
    None if no broker answered or the topic is unknown."""
    best: dict[int, dict[str, Any]] = {}
    answered = False
    for host, port in brokers:
        try:
            with Wire(port, ADMIN_TIMEOUT_S, host) as wire:
                answer = wire.metadata([topic])
        except (OSError, ConnectionError, ValueError):
            continue
        t = answer.topics[0] if answer.topics else None
        if t is None or t.error_code != 0:
            continue
        answered = True
        for p in t.partitions:
            doc = {
                "partition": p.partition_index,
                "leader": p.leader_id if p.leader_id >= 0 else None,
                "leader_epoch": p.leader_epoch,
                "replicas": list(p.replica_nodes),
                "isr": list(p.isr_nodes),
            }
            seen = best.get(p.partition_index)
            if seen is None or doc["leader_epoch"] > seen["leader_epoch"]:
                best[p.partition_index] = doc
    if not answered:
        return None
    return {"name": topic, "partitions": [best[p] for p in sorted(best)]}


# ------------------------------------------------------------- the queue workload's clients


class KafkaProtocolClients:
    """The queue workload's three client hooks (harness/jepsen/workload_queue.py
    `_new_producer`, `_new_consumer`, `_release_consumer`) over the Kafka protocol, to the
    brokers at `self.bootstrap`, and `close_kafka_clients` for the end of the final phase.
    Mixed in before QueueWorkload: by the Apache Kafka target (workload_queue_kafka.py) and by
    kraftlab runs with `--client kafka` (workload_queue_kafka.py `KafkaClientQueueWorkload`), so
    both systems can be driven by one client."""

    bootstrap: str

    def _kafka_clients_init(self) -> None:
        self._consumers_open: list[KafkaConsumerClient] = []
        self._producers_made: list[KafkaProducerClient] = []

    async def _new_producer(self, config: ProducerConfig) -> Any:
        producer = await KafkaProducerClient.create(self.bootstrap, config)
        self._producers_made.append(producer)
        return producer

    def _new_consumer(self, config: ConsumerConfig) -> Any:
        consumer = KafkaConsumerClient(self.bootstrap, config)
        self._consumers_open.append(consumer)
        return consumer

    async def _release_consumer(self, consumer: Any) -> None:
        if consumer in self._consumers_open:
            self._consumers_open.remove(consumer)
        await consumer.close()

    async def close_kafka_clients(self) -> None:
        """Every consumer still open and every producer made, each within its own bound."""
        await asyncio.gather(*(c.close() for c in self._consumers_open),
                             *(p.closed() for p in self._producers_made),
                             return_exceptions=True)
        self._consumers_open.clear()
