"""The data-plane runs' clients: producers and consumers at a steady simulated rate, recording a
Jepsen queue history (docs/jepsen.md):

- `send` invoke [tp, value]; ok [tp, [offset, value]]; `fail` only when the record was certainly
  not appended (no leader known, NOT_ENOUGH_REPLICAS before the append); every other error or a
  timeout is `info` (indeterminate) and the process continues under a new id (Jepsen's rule);
- `poll` invoke [tp]; ok {tp: [[offset, value], ...]} read from the leader below its HW; a failed
  poll is `fail` (a read changes nothing);
- the final drain (harness.sim.runs.cluster.Cluster.final_drain): after the heal and a quiet
  period, one `poll` with `"final": true` reading the leader's whole log below its HW.

`Client` is the actor (harness.sim.runs.world): it owns the schedule (one invocation every
`interval_ms` from `start`, at most one request in flight, its timeout) and leader discovery,
like a Kafka client: from a metadata answer of a broker it reaches (that broker's own, possibly
stale, view) and from the leader hint of NOT_LEADER_OR_FOLLOWER errors. `Producer` and
`Consumer` say what one operation is and what its answer means.

Invariants: at most one request in flight per client; every invocation is completed exactly
once in the history (ok, fail, info) or left open at the end (indeterminate); request ids are
unique in the run (`ClientContext.next_request_id`).
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from typing import Any, Protocol

from harness.check.history import Event
from harness.sim.actors.process import SimProcess
from harness.sim.checks.replicas import decode_values
from partition.log import Record, encode_batch
from partition.replica import FetchRequest, FetchResponse, ProduceRequest, ProduceResponse
from quorum.metadata.errors import Errors

CLIENT_BASE = 1000  # client node ids start here
TP = "t-0"
DEFINITE_FAILURES = (Errors.NOT_ENOUGH_REPLICAS,)


class History:
    def __init__(self) -> None:
        self.events: list[Event] = []

    def add(self, time_ms: int, process: int, type_: str, f: str, value: Any,
            error: str | None = None, **extra: Any) -> None:
        self.events.append(Event(len(self.events), time_ms * 1_000_000, process, type_,  # type: ignore[arg-type]
                                 f, value, error, extra))


class ClientContext(Protocol):
    """What a client needs from its run: the topic's id ("" until it exists), unique request
    ids, and a reachable broker's view of the partition leader (a Metadata request)."""

    @property
    def topic_id(self) -> str: ...

    def next_request_id(self) -> int: ...

    def leader_seen_by(self, client: int, rng: random.Random) -> int: ...


class Client(SimProcess, ABC):
    """One client process (see the module docstring)."""

    def __init__(self, node_id: int, context: ClientContext, history: History, process: int,
                 concurrency: int, interval_ms: int, timeout_ms: int,
                 rng: random.Random) -> None:
        self.node_id = node_id
        self.context = context
        self.history = history
        self.process = process
        self.concurrency = concurrency
        self.interval_ms = interval_ms
        self.timeout_ms = timeout_ms
        self.rng = rng
        self.leader = -1
        self.in_flight: tuple[int, Any, int] | None = None  # (request id, payload, deadline)
        self.next_step_ms: int | None = None
        self.stopped = False
        # The actor's process state: a client is never faulted (it is not a node).
        self.init_process()
        self.process_started()

    def start(self, at_ms: int) -> None:
        """Invoke the first operation at `at_ms` (the world then arms the timer)."""
        self.next_step_ms = at_ms

    # -- the actor --------------------------------------------------------------------------------

    def next_deadline_ms(self) -> int | None:
        deadlines = [] if self.in_flight is None else [self.in_flight[2]]
        if not self.stopped and self.next_step_ms is not None:
            deadlines.append(self.next_step_ms)
        return min(deadlines) if deadlines else None

    def tick(self, now_ms: int) -> None:
        if self.in_flight is not None and now_ms >= self.in_flight[2]:
            _, payload, _ = self.in_flight
            self.in_flight = None
            self.timed_out(payload, now_ms)
            self.process += self.concurrency  # an indeterminate outcome: a new process
            self.refresh_leader()
        if self.stopped or self.next_step_ms is None or now_ms < self.next_step_ms:
            return
        self.next_step_ms = now_ms + self.interval_ms
        if self.in_flight is None:
            self.invoke(now_ms)

    def handle(self, src: int, message: Any, now_ms: int) -> None:
        if self.in_flight is None or getattr(message, "request_id", None) != self.in_flight[0]:
            return  # a late answer to a request given up, or not ours
        _, payload, _ = self.in_flight
        self.in_flight = None
        self.answered(message, payload, now_ms)

    def peer_unreachable(self, peer: int, now_ms: int) -> None:
        """A refused connection changes nothing: the request in flight times out."""
        return None

    # -- for the operations -----------------------------------------------------------------------

    def refresh_leader(self) -> None:
        """Ask a reachable broker for its view of the partition (a Metadata request)."""
        self.leader = self.context.leader_seen_by(self.node_id, self.rng)

    def follow_hint(self, leader_id: int) -> None:
        """After an error: the leader hint if it names a new leader, else ask again."""
        if leader_id >= 0 and leader_id != self.leader:
            self.leader = leader_id
        else:
            self.refresh_leader()

    def request(self, message: Any, payload: Any, now_ms: int) -> None:
        """Send `message` (its request_id from `new_request_id`) to the believed leader."""
        self.in_flight = (message.request_id, payload, now_ms + self.timeout_ms)
        self.outbox.append((self.leader, message))

    def leader_known(self) -> bool:
        if self.leader < 0:
            self.refresh_leader()
        return self.leader >= 0 and bool(self.context.topic_id)

    @abstractmethod
    def invoke(self, now_ms: int) -> None:
        """Record the next operation's invocation and send it (or fail it at once)."""

    @abstractmethod
    def answered(self, message: Any, payload: Any, now_ms: int) -> None:
        """Record the answer to the request in flight."""

    @abstractmethod
    def timed_out(self, payload: Any, now_ms: int) -> None:
        """Record the request in flight as indeterminate."""


class Producer(Client):
    """Sends one record per step: values from a counter shared by the run's producers."""

    def __init__(self, node_id: int, context: ClientContext, history: History, process: int,
                 concurrency: int, acks: int, interval_ms: int, request_timeout_ms: int,
                 values: list[int], rng: random.Random) -> None:
        # A produce waits up to request_timeout_ms on the broker: give it a little more.
        super().__init__(node_id, context, history, process, concurrency, interval_ms,
                         request_timeout_ms + 50, rng)
        self.acks = acks
        self.request_timeout_ms = request_timeout_ms
        self.values = values  # shared counter [next value]

    def invoke(self, now_ms: int) -> None:
        value = self.values[0]
        self.values[0] += 1
        self.history.add(now_ms, self.process, "invoke", "send", [TP, value])
        if not self.leader_known():
            self.history.add(now_ms, self.process, "fail", "send", [TP, value],
                             error="LEADER_NOT_AVAILABLE")
            return
        records = encode_batch([Record(str(value).encode())])
        self.request(ProduceRequest(self.context.topic_id, 0, self.context.next_request_id(),
                                    records, self.acks, self.request_timeout_ms), value, now_ms)

    def answered(self, message: Any, payload: Any, now_ms: int) -> None:
        assert isinstance(message, ProduceResponse)
        if message.error is Errors.NONE:
            self.history.add(now_ms, self.process, "ok", "send",
                             [TP, [message.base_offset, payload]])
            return
        if message.error in DEFINITE_FAILURES:
            self.history.add(now_ms, self.process, "fail", "send", [TP, payload],
                             error=message.error.name)
        else:
            self.history.add(now_ms, self.process, "info", "send", [TP, payload],
                             error=message.error.name)
            self.process += self.concurrency
        self.follow_hint(message.leader_id)

    def timed_out(self, payload: Any, now_ms: int) -> None:
        self.history.add(now_ms, self.process, "info", "send", [TP, payload],
                         error="REQUEST_TIMED_OUT")


class Consumer(Client):
    """Polls from its position, below the HW (auto.offset.reset=earliest)."""

    def __init__(self, node_id: int, context: ClientContext, history: History, process: int,
                 concurrency: int, interval_ms: int, request_timeout_ms: int,
                 rng: random.Random) -> None:
        super().__init__(node_id, context, history, process, concurrency, interval_ms,
                         request_timeout_ms, rng)
        self.position = 0

    def invoke(self, now_ms: int) -> None:
        self.history.add(now_ms, self.process, "invoke", "poll", [TP])
        if not self.leader_known():
            self.history.add(now_ms, self.process, "fail", "poll", None,
                             error="LEADER_NOT_AVAILABLE")
            return
        self.request(FetchRequest(self.context.topic_id, 0, -1, self.position, max_bytes=1 << 16,
                                  request_id=self.context.next_request_id()), None, now_ms)

    def answered(self, message: Any, payload: Any, now_ms: int) -> None:
        assert isinstance(message, FetchResponse)
        if message.error is Errors.NONE:
            rows = decode_values(message.records)
            rows = [row for row in rows if self.position <= row[0] < message.high_watermark]
            if rows:
                self.position = rows[-1][0] + 1
            self.history.add(now_ms, self.process, "ok", "poll", {TP: rows})
            return
        # A read that failed changed nothing: `fail` (reads are not indeterminate).
        self.history.add(now_ms, self.process, "fail", "poll", None, error=message.error.name)
        if message.error is Errors.OFFSET_OUT_OF_RANGE:
            self.position = 0  # auto.offset.reset=earliest after a truncation below our position
        if message.leader_id >= 0:
            self.leader = message.leader_id
        else:
            self.refresh_leader()

    def timed_out(self, payload: Any, now_ms: int) -> None:
        self.history.add(now_ms, self.process, "info", "poll", None, error="REQUEST_TIMED_OUT")
