"""Simulated clients of the data-plane simulation: producers and a consumer at a steady
simulated rate, recording a Jepsen queue history (docs/jepsen.md, /work/shared/API.md shapes):

- `send` invoke [tp, value]; ok [tp, [offset, value]]; `fail` only when the record was certainly
  not appended (no leader known, NOT_ENOUGH_REPLICAS before the append); every other error or a
  timeout is `info` (indeterminate) and the process continues under a new id (Jepsen's rule);
- `poll` invoke [tp]; ok {tp: [[offset, value], ...]} read from the leader below its HW;
- the final drain: after the heal and a quiet period, one `poll` with `"final": true` reading the
  leader's whole log below its HW (skipped when no leader exists: the partition is unavailable).

Clients find the leader like a Kafka client: from a metadata answer of a broker they reach (its
own, possibly stale, view) and from the leader hint of NOT_LEADER_OR_FOLLOWER errors.
"""

from __future__ import annotations

import random
from typing import Any

from harness.check.history import Event
from harness.sim.actors.data_world import World
from partition.log import Record, encode_batch
from partition.log import batch as rb
from partition.replica import FetchRequest, FetchResponse, ProduceRequest, ProduceResponse
from quorum.metadata.errors import Errors

TP = "t-0"
DEFINITE_FAILURES = (Errors.NOT_ENOUGH_REPLICAS,)


class History:
    def __init__(self) -> None:
        self.events: list[Event] = []

    def add(self, time_ms: int, process: int, type_: str, f: str, value: Any,
            error: str | None = None, **extra: Any) -> None:
        self.events.append(Event(len(self.events), time_ms * 1_000_000, process, type_,  # type: ignore[arg-type]
                                 f, value, error, extra))


class Client:
    """Shared: leader discovery, request ids, timeouts."""

    def __init__(self, world: World, node_id: int, history: History, process: int,
                 concurrency: int) -> None:
        self.world = world
        self.node_id = node_id
        self.history = history
        self.process = process
        self.concurrency = concurrency
        self.rng = random.Random(world.seed * 1009 + node_id)
        self.leader = -1
        self.in_flight: tuple[int, Any] | None = None  # (request_id, invoke payload)
        self.stopped = False
        world.clients[node_id] = self

    def refresh_leader(self) -> None:
        """Ask a reachable broker for its view of the partition (a Metadata request)."""
        candidates = [b for b, broker in sorted(self.world.brokers.items())
                      if broker.up and not broker.paused and broker.core is not None
                      and self.world.network.can_reach(self.node_id, b)]
        if not candidates:
            self.leader = -1
            return
        broker = self.world.brokers[self.rng.choice(candidates)]
        part = broker.core.partition if broker.core is not None else None
        self.leader = part.leader if part is not None else -1

    def next_request_id(self) -> int:
        self.world.next_request_id += 1
        return self.world.next_request_id

    def new_process(self) -> None:
        self.process += self.concurrency


class Producer(Client):
    def __init__(self, world: World, node_id: int, history: History, process: int,
                 concurrency: int, acks: int, interval_ms: int, values: list[int]) -> None:
        super().__init__(world, node_id, history, process, concurrency)
        self.acks = acks
        self.interval_ms = interval_ms
        self.values = values  # shared counter [next value]

    def start(self, at_ms: int) -> None:
        self.world.queue.call_at(at_ms, self._step)

    def _step(self) -> None:
        q = self.world.queue
        if self.stopped:
            return
        q.call_at(q.now_ms + self.interval_ms, self._step)
        if self.in_flight is not None:
            return
        value = self.values[0]
        self.values[0] += 1
        now = q.now_ms
        self.history.add(now, self.process, "invoke", "send", [TP, value])
        if self.leader < 0:
            self.refresh_leader()
        if self.leader < 0 or not self.world.topic_id:
            self.history.add(now, self.process, "fail", "send", [TP, value],
                             error="LEADER_NOT_AVAILABLE")
            return
        request_id = self.next_request_id()
        records = encode_batch([Record(str(value).encode())])
        self.world.producer_of[request_id] = self.node_id
        self.in_flight = (request_id, value)
        self.world.send(self.node_id, self.leader, ProduceRequest(
            self.world.topic_id, 0, request_id, records, self.acks,
            self.world.timing.request_timeout_ms))
        q.call_at(now + self.world.timing.request_timeout_ms + 50, self._timeout, request_id)

    def _timeout(self, request_id: int) -> None:
        if self.in_flight is None or self.in_flight[0] != request_id:
            return
        self.world.producer_of.pop(request_id, None)
        self.history.add(self.world.queue.now_ms, self.process, "info", "send",
                         [TP, self.in_flight[1]], error="REQUEST_TIMED_OUT")
        self.in_flight = None
        self.new_process()
        self.refresh_leader()

    def deliver(self, src: int, message: Any) -> None:
        if not isinstance(message, ProduceResponse) or self.in_flight is None:
            return
        request_id, value = self.in_flight
        if message.request_id != request_id:
            return
        self.in_flight = None
        now = self.world.queue.now_ms
        if message.error is Errors.NONE:
            self.history.add(now, self.process, "ok", "send", [TP, [message.base_offset, value]])
            return
        if message.error in DEFINITE_FAILURES:
            self.history.add(now, self.process, "fail", "send", [TP, value],
                             error=message.error.name)
        else:
            self.history.add(now, self.process, "info", "send", [TP, value],
                             error=message.error.name)
            self.new_process()
        if message.leader_id >= 0 and message.leader_id != self.leader:
            self.leader = message.leader_id
        else:
            self.refresh_leader()


def decode_values(data: bytes) -> list[list[int]]:
    out: list[list[int]] = []
    for h in rb.iter_headers(data, check_crc=False):
        if h.is_control:
            continue  # a quorum-mode leader's epoch marker: consumers skip control batches
        for r in rb.decode_records(data, h):
            out.append([r.offset, int((r.value or b"0").decode())])
    return out


class Consumer(Client):
    def __init__(self, world: World, node_id: int, history: History, process: int,
                 concurrency: int, interval_ms: int) -> None:
        super().__init__(world, node_id, history, process, concurrency)
        self.interval_ms = interval_ms
        self.position = 0

    def start(self, at_ms: int) -> None:
        self.world.queue.call_at(at_ms, self._step)

    def _step(self) -> None:
        q = self.world.queue
        if self.stopped:
            return
        q.call_at(q.now_ms + self.interval_ms, self._step)
        if self.in_flight is not None:
            return
        now = q.now_ms
        self.history.add(now, self.process, "invoke", "poll", [TP])
        if self.leader < 0:
            self.refresh_leader()
        if self.leader < 0 or not self.world.topic_id:
            self.history.add(now, self.process, "fail", "poll", None,
                             error="LEADER_NOT_AVAILABLE")
            return
        request_id = self.next_request_id()
        self.world.consumer_of[request_id] = self.node_id
        self.in_flight = (request_id, None)
        self.world.send(self.node_id, self.leader, FetchRequest(
            self.world.topic_id, 0, -1, self.position, max_bytes=1 << 16, request_id=request_id))
        q.call_at(now + self.world.timing.request_timeout_ms, self._timeout, request_id)

    def _timeout(self, request_id: int) -> None:
        if self.in_flight is None or self.in_flight[0] != request_id:
            return
        self.world.consumer_of.pop(request_id, None)
        self.history.add(self.world.queue.now_ms, self.process, "info", "poll", None,
                         error="REQUEST_TIMED_OUT")
        self.in_flight = None
        self.new_process()
        self.refresh_leader()

    def deliver(self, src: int, message: Any) -> None:
        if not isinstance(message, FetchResponse) or self.in_flight is None:
            return
        if message.request_id != self.in_flight[0]:
            return
        self.in_flight = None
        now = self.world.queue.now_ms
        if message.error is Errors.NONE:
            rows = decode_values(message.records)
            rows = [row for row in rows if self.position <= row[0] < message.high_watermark]
            if rows:
                self.position = rows[-1][0] + 1
            self.history.add(now, self.process, "ok", "poll", {TP: rows})
            return
        # A read that failed changed nothing: `fail` (reads are not indeterminate).
        self.history.add(now, self.process, "fail", "poll", None, error=message.error.name)
        if message.error is Errors.OFFSET_OUT_OF_RANGE:
            self.position = 0  # auto.offset.reset=earliest after a truncation below our position
        if message.leader_id >= 0:
            self.leader = message.leader_id
        else:
            self.refresh_leader()


def final_drain(world: World, history: History, process: int) -> bool:
    """After the heal: read the leader's log below its HW from the beginning (final poll)."""
    leader = world.leader_id()
    broker = world.brokers.get(leader)
    if broker is None or not broker.up or broker.core is None or not broker.core.is_leader:
        return False
    log = broker.log
    assert log is not None
    hw = broker.core.high_watermark
    rows = [row for row in decode_values(log.read(log.log_start_offset, 1 << 26, max_offset=hw))
            if row[0] < hw] if hw > log.log_start_offset else []
    now = world.queue.now_ms
    history.add(now, process, "invoke", "poll", [TP], final=True)
    history.add(now, process, "ok", "poll", {TP: rows}, final=True)
    return True
