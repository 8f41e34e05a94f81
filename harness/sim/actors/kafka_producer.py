"""A producer like Kafka's (KafkaProducer with its defaults), as a simulated client.

Records are offered open-loop: one every `interval_ms`, whatever is in flight (the application
calls `send()` on a schedule; Kafka's accumulator buffers). Each record is one history
operation (its own Jepsen process): `send` invoked when offered, `ok` when its batch is
acknowledged (the latency includes every retry), `fail` when it certainly was not written,
`info` when it may have been.

The client, as Kafka's with `enable.idempotence=true` (the default since Kafka 3.0),
`max.in.flight.requests.per.connection=1` (a simplification: order is kept either way) and
`linger.ms=0`:
- one request in flight; records offered meanwhile wait in the accumulator and leave together
  as the next batch (up to `max_batch_records`);
- a batch carries a producer id and the base sequence of its first record (KIP-98); a retry
  resends the same bytes, so the leader acknowledges a duplicate with the original offsets
  instead of writing it twice;
- a retriable error (Errors.retriable) or no answer within `request_timeout_ms` is retried
  after `retry_backoff_ms`, with the leader rediscovered, until `delivery_timeout_ms` after the
  batch's first record was offered; then the batch's records complete as `info` if any attempt
  may have written them (a timeout, an error after the append), else `fail`. Records still in
  the accumulator at their delivery timeout were never sent: `fail`;
- OUT_OF_ORDER_SEQUENCE_NUMBER / INVALID_PRODUCER_EPOCH: this attempt was
  not written; the batch fails (or is `info` if an earlier attempt may have been written) and the
  producer starts a new idempotent session (a new producer id, sequence 0: KIP-360's epoch bump);
  an expired batch does the same, since the broker's view of its sequence is unknown.

Kafka's defaults scaled like the simulated cluster's timeouts (harness.sim.runs.cluster
DataTiming: broker.session.timeout.ms 1 s for Kafka's 9 s): request.timeout.ms 30 s -> REQUEST_TIMEOUT_MS,
delivery.timeout.ms = 4 x request.timeout.ms (120 s in Kafka), retry.backoff.ms 100 ms unscaled.

A probe (`probe=True`) is the same client at a short interval whose operations are marked
`probe` in the history: the run's availability in time (harness.sim.runs.matrix) counts its
slots, and the attempt-based columns leave them out.

Invariants: every offered record is invoked once and completed at most once (open at the end if
its batch is still in flight); a batch's records complete together; at most one request in flight.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from harness.sim.actors.clients import TP, Client, ClientContext, History
from partition.log import Record, encode_batch
from partition.replica import ProduceRequest, ProduceResponse
from quorum.metadata.errors import Errors

REQUEST_TIMEOUT_MS = 1000
DELIVERY_TIMEOUT_MS = 4 * REQUEST_TIMEOUT_MS
RETRY_BACKOFF_MS = 100
MAX_BATCH_RECORDS = 100
SESSION_ERRORS = (Errors.OUT_OF_ORDER_SEQUENCE_NUMBER, Errors.INVALID_PRODUCER_EPOCH)
# Errors after which the records certainly are not in the log (the leader refused before
# appending): NOT_ENOUGH_REPLICAS is checked before the append (Partition.appendRecordsToLeader).
NOT_WRITTEN = (Errors.NOT_ENOUGH_REPLICAS, Errors.NOT_LEADER_OR_FOLLOWER,
               Errors.UNKNOWN_TOPIC_OR_PARTITION, Errors.LEADER_NOT_AVAILABLE, *SESSION_ERRORS)


@dataclass(frozen=True, slots=True)
class ProducerSettings:
    request_timeout_ms: int = REQUEST_TIMEOUT_MS
    delivery_timeout_ms: int = DELIVERY_TIMEOUT_MS
    retry_backoff_ms: int = RETRY_BACKOFF_MS
    max_batch_records: int = MAX_BATCH_RECORDS


@dataclass(frozen=True, slots=True)
class _Offered:
    value: int
    invoked_ms: int
    process: int


@dataclass(slots=True)
class _Batch:
    records: tuple[_Offered, ...]
    producer_id: int
    base_sequence: int
    payload: bytes
    maybe_written: bool = False
    attempts: int = 0

    @property
    def expires_ms(self) -> int:
        return self.records[0].invoked_ms


@dataclass(slots=True)
class _Session:
    producer_id: int
    next_sequence: int = 0
    batches: int = field(default=0)


class KafkaProducer(Client):
    """See the module docstring."""

    def __init__(self, node_id: int, context: ClientContext, history: History, process: int,
                 concurrency: int, acks: int, interval_ms: int, values: list[int],
                 rng: random.Random, settings: ProducerSettings = ProducerSettings(),
                 probe: bool = False) -> None:
        # The client deadline of one attempt: the broker's own timeout plus a little.
        super().__init__(node_id, context, history, process, concurrency, interval_ms,
                         settings.request_timeout_ms + 50, rng)
        self.acks = acks
        self.settings = settings
        self.values = values  # the run's shared counter [next value]
        self.probe = probe
        self.accumulator: list[_Offered] = []
        self.batch: _Batch | None = None  # the batch being sent (in flight or backing off)
        self.retry_at_ms: int | None = None
        self.session: _Session | None = None

    # -- the actor ------------------------------------------------------------------------------

    def next_deadline_ms(self) -> int | None:
        deadlines = [] if self.in_flight is None else [self.in_flight[2]]
        if not self.stopped and self.next_step_ms is not None:
            deadlines.append(self.next_step_ms)
        if self.in_flight is None and (self.batch is not None or self.accumulator):
            deadlines.append(self.retry_at_ms if self.retry_at_ms is not None else 0)
        if self.accumulator:
            deadlines.append(self.accumulator[0].invoked_ms + self.settings.delivery_timeout_ms)
        return min(deadlines) if deadlines else None

    def tick(self, now_ms: int) -> None:
        if self.in_flight is not None and now_ms >= self.in_flight[2]:
            self.in_flight = None
            assert self.batch is not None
            self.batch.maybe_written = True  # no answer: it may have been appended
            self.refresh_leader()
            self._retry_or_expire(now_ms)
        if not self.stopped and self.next_step_ms is not None and now_ms >= self.next_step_ms:
            self.next_step_ms = now_ms + self.interval_ms
            self.invoke(now_ms)
        self._expire_unsent(now_ms)
        self._maybe_send(now_ms)

    def invoke(self, now_ms: int) -> None:
        value = self.values[0]
        self.values[0] += 1
        record = _Offered(value, now_ms, self.process)
        self.process += self.concurrency  # each record is its own operation
        self._add(now_ms, record, "invoke")
        self.accumulator.append(record)

    def answered(self, message: Any, payload: Any, now_ms: int) -> None:
        assert isinstance(message, ProduceResponse)
        batch = self.batch
        assert batch is not None
        if message.error is Errors.NONE:
            for i, record in enumerate(batch.records):
                self._add(now_ms, record, "ok", [TP, [message.base_offset + i, record.value]])
            self.batch, self.retry_at_ms = None, None
            self._maybe_send(now_ms)
            return
        if message.error not in NOT_WRITTEN:
            batch.maybe_written = True  # e.g. NOT_ENOUGH_REPLICAS_AFTER_APPEND, REQUEST_TIMED_OUT
        if message.error in SESSION_ERRORS:
            self._complete(batch, now_ms, message.error.name)
            self._maybe_send(now_ms)
            return
        if not message.error.retriable:
            batch.maybe_written = True
            self._complete(batch, now_ms, message.error.name)
            self._maybe_send(now_ms)
            return
        self.follow_hint(message.leader_id)
        self._retry_or_expire(now_ms)

    def timed_out(self, payload: Any, now_ms: int) -> None:
        raise AssertionError("KafkaProducer handles its own timeouts in tick")

    # -- batches --------------------------------------------------------------------------------

    def _add(self, now_ms: int, record: _Offered, type_: str, value: Any = None,
             error: str | None = None) -> None:
        extra = {"probe": True} if self.probe else {}
        self.history.add(now_ms, record.process, type_, "send",
                         value if value is not None else [TP, record.value], error=error, **extra)

    def _retry_or_expire(self, now_ms: int) -> None:
        batch = self.batch
        assert batch is not None
        if now_ms >= batch.expires_ms + self.settings.delivery_timeout_ms:
            self._complete(batch, now_ms, "DELIVERY_TIMEOUT")
        else:
            self.retry_at_ms = now_ms + self.settings.retry_backoff_ms

    def _complete(self, batch: _Batch, now_ms: int, error: str) -> None:
        """The batch ends unacknowledged: `info` if it may be in the log, else `fail`; the
        idempotent session restarts (the broker's sequence for it is unknown)."""
        type_ = "info" if batch.maybe_written else "fail"
        for record in batch.records:
            self._add(now_ms, record, type_, error=error)
        self.batch, self.retry_at_ms, self.session = None, now_ms, None

    def _expire_unsent(self, now_ms: int) -> None:
        limit = self.settings.delivery_timeout_ms
        while self.accumulator and now_ms >= self.accumulator[0].invoked_ms + limit:
            self._add(now_ms, self.accumulator.pop(0), "fail", error="DELIVERY_TIMEOUT")

    def _next_batch(self) -> _Batch:
        if self.session is None:
            self.session = _Session(self.context.next_request_id())
        session = self.session
        records = tuple(self.accumulator[:self.settings.max_batch_records])
        del self.accumulator[:len(records)]
        payload = encode_batch([Record(str(r.value).encode()) for r in records],
                               producer_id=session.producer_id, producer_epoch=0,
                               base_sequence=session.next_sequence)
        session.next_sequence += len(records)
        session.batches += 1
        return _Batch(records, session.producer_id, session.next_sequence - len(records),
                      payload)

    def _maybe_send(self, now_ms: int) -> None:
        if self.in_flight is not None or (self.batch is None and not self.accumulator):
            return
        if self.retry_at_ms is not None and now_ms < self.retry_at_ms:
            return
        if not self.leader_known():
            self.retry_at_ms = now_ms + self.settings.retry_backoff_ms
            return
        if self.batch is None:
            self.batch = self._next_batch()
        self.batch.attempts += 1
        self.retry_at_ms = None
        self.request(ProduceRequest(self.context.topic_id, 0, self.context.next_request_id(),
                                    self.batch.payload, self.acks,
                                    self.settings.request_timeout_ms), None, now_ms)
