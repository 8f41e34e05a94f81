"""The simulated Kafka-like producer (harness/sim/actors/kafka_producer.py) driven by hand: open
loop, batching behind the request in flight, idempotent retries with the same sequence, the
delivery timeout's fail/info split, and a new idempotent session after a sequence error."""

from __future__ import annotations

import random

from harness.check.history import pair_operations
from harness.sim.actors.clients import History
from harness.sim.actors.kafka_producer import KafkaProducer, ProducerSettings
from partition.log import batch as rb
from partition.replica import ProduceRequest, ProduceResponse
from quorum.metadata.errors import Errors

SETTINGS = ProducerSettings(request_timeout_ms=100, delivery_timeout_ms=400,
                            retry_backoff_ms=20)


class Context:
    """A topic that exists, a leader (broker 1), unique ids."""

    def __init__(self) -> None:
        self.ids = 0
        self.leader = 1

    @property
    def topic_id(self) -> str:
        return "T"

    def next_request_id(self) -> int:
        self.ids += 1
        return self.ids

    def leader_seen_by(self, client: int, rng: random.Random) -> int:
        return self.leader


def producer(interval_ms: int = 10, probe: bool = False) -> tuple[KafkaProducer, History]:
    history = History()
    p = KafkaProducer(1000, Context(), history, 0, 4, -1, interval_ms, [1], random.Random(1),
                      SETTINGS, probe=probe)
    p.start(0)
    return p, history


def sent(p: KafkaProducer) -> list[ProduceRequest]:
    out, p.outbox = [m for _, m in p.outbox], []
    return out


def header(request: ProduceRequest) -> rb.BatchHeader:
    (h,) = rb.iter_headers(request.records)
    return h


def run_to(p: KafkaProducer, until_ms: int) -> None:
    """Tick at every deadline up to `until_ms` (what the world's timer does)."""
    while (d := p.next_deadline_ms()) is not None and d <= until_ms:
        p.tick(d)


def kinds(history: History) -> list[tuple[str, object]]:
    return [(e.type, e.value) for e in history.events]


def test_records_are_offered_open_loop_and_batch_behind_the_request_in_flight():
    p, history = producer(interval_ms=10)
    run_to(p, 0)
    (first,) = sent(p)
    assert (header(first).base_sequence, header(first).record_count) == (0, 1)
    run_to(p, 35)  # no answer yet: three more records offered, none sent
    assert sent(p) == [] and len(p.accumulator) == 3
    p.handle(1, ProduceResponse(first.request_id, Errors.NONE, 40, 40), 36)
    (second,) = sent(p)
    h = header(second)
    assert (h.producer_id, h.base_sequence, h.record_count) == (header(first).producer_id, 1, 3)
    p.handle(1, ProduceResponse(second.request_id, Errors.NONE, 41, 43), 40)
    ops = pair_operations(history.events)
    assert [(op.type, op.value) for op in ops] == [
        ("ok", ["t-0", [40, 1]]), ("ok", ["t-0", [41, 2]]), ("ok", ["t-0", [42, 3]]),
        ("ok", ["t-0", [43, 4]])]
    # Latency counts from the offer: record 2 was offered at 10 and acknowledged at 40.
    assert (ops[1].invoke.time, ops[1].completion.time) == (10_000_000, 40_000_000)


def test_a_retry_resends_the_same_batch_and_sequence_until_it_is_acknowledged():
    p, history = producer(interval_ms=1000)
    run_to(p, 0)
    (first,) = sent(p)
    p.handle(1, ProduceResponse(first.request_id, Errors.NOT_LEADER_OR_FOLLOWER, leader_id=2), 5)
    assert p.leader == 2 and sent(p) == []
    run_to(p, 25)  # retry.backoff.ms later
    (retry,) = sent(p)
    assert retry.records == first.records and retry.request_id != first.request_id
    run_to(p, 25 + 150 + 20)  # no answer by 175 (request timeout + 50): retried at 195
    (again,) = sent(p)
    assert again.records == first.records
    p.handle(2, ProduceResponse(again.request_id, Errors.NONE, 7, 7), 200)
    assert kinds(history)[-1] == ("ok", ["t-0", [7, 1]])


def test_the_delivery_timeout_fails_what_was_never_written_and_leaves_the_rest_unknown():
    # Refused before the append every time: certainly not written -> fail.
    p, history = producer(interval_ms=1000)
    run_to(p, 0)
    t = 0
    while t < 420:
        (request,) = sent(p)
        t += 5
        p.handle(1, ProduceResponse(request.request_id, Errors.NOT_ENOUGH_REPLICAS), t)
        run_to(p, t + 20)
        t += 20
    assert kinds(history)[-1] == ("fail", ["t-0", 1])
    assert history.events[-1].error == "DELIVERY_TIMEOUT"
    # Timed out once: it may be in the log -> info; the next batch gets a new producer id.
    p, history = producer(interval_ms=1000)
    run_to(p, 0)
    (first,) = sent(p)
    # Attempts time out at 150, 320 and 490 ms; the batch expires when the attempt in flight
    # ends past its delivery timeout (400 ms), as Kafka's in-flight batches do.
    run_to(p, 489)
    assert [e.type for e in history.events] == ["invoke"]
    run_to(p, 490)
    assert [e.type for e in history.events] == ["invoke", "info"]
    sent(p)
    run_to(p, 1000)
    (next_batch,) = sent(p)
    assert header(next_batch).producer_id != header(first).producer_id
    assert header(next_batch).base_sequence == 0


def test_records_never_sent_fail_at_their_delivery_timeout():
    p, history = producer(interval_ms=300)
    p.context.leader = -1  # no leader known: nothing can be sent
    run_to(p, 700)
    # Offered at 0, 300, 600; the first fails at 400 (its delivery timeout), the second at 700.
    assert [(e.type, e.value[1], e.time // 1_000_000) for e in history.events] == [
        ("invoke", 1, 0), ("invoke", 2, 300), ("fail", 1, 400), ("invoke", 3, 600),
        ("fail", 2, 700)]
    assert sent(p) == []


def test_a_sequence_error_starts_a_new_idempotent_session():
    p, history = producer(interval_ms=1000)
    run_to(p, 0)
    (first,) = sent(p)
    p.handle(1, ProduceResponse(first.request_id, Errors.OUT_OF_ORDER_SEQUENCE_NUMBER), 3)
    assert kinds(history)[-1] == ("fail", ["t-0", 1])
    run_to(p, 1000)
    (second,) = sent(p)
    assert header(second).producer_id != header(first).producer_id
    assert header(second).base_sequence == 0


def test_probe_operations_are_marked():
    p, history = producer(interval_ms=10, probe=True)
    run_to(p, 0)
    assert history.events[0].extra == {"probe": True}
