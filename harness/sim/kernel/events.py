"""The simulator's event queue and event kinds: a virtual clock in integer ms. Every simulated run
(the quorum run, the metadata run, the data-plane runs) schedules on this one queue.

Two families of events:
- data events (`Deliver`, `TimerFired`, `ConnectionRefused`, `Resume`, the kv client's and the
  run's phases), dispatched by the run that owns the queue;
- `Call`: an actor's own scheduled work (a flush, a retry, a producer's next send), run as
  `fn(*args)` by whoever pops it.

Invariants:
- events pop in (time_ms, seq) order, where `seq` is the order they were scheduled in; two events
  at the same millisecond therefore always run in the same order for the same seed (the
  deterministic tie-break FoundationDB's and TigerBeetle's simulators rely on);
- time never goes backwards: scheduling before `now_ms` is a programming error (ValueError); a
  caller whose deadline is already due says so by scheduling at `now_ms` (a core's
  next_deadline_ms may lie in the past; the caller decides that "due" means "now");
- events are frozen dataclasses whose `repr` is deterministic, so the trace digest of a run
  (harness.sim.runs.simulation) is a hash of every event that ran, in order.

The queue is the one clock of a run: its `now_ms` advances only as events are popped, and
nothing in a simulated run reads the wall clock. For what lives outside a run's objects (log
lines), the queue mirrors each popped event's time into `SIM_CLOCK`, which the structlog
processor of harness.sim.runs.runner stamps on every line (`sim_ms`), so a seed's log is
byte-identical run to run (one run at a time per process: runs fan out over processes).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


class SimClock:
    """A simulated time in integer milliseconds."""

    __slots__ = ("now_ms",)

    def __init__(self) -> None:
        self.now_ms = 0


SIM_CLOCK = SimClock()  # the time of the event being run, for log lines


@dataclass(frozen=True, slots=True)
class Deliver:
    """A message from `src` arrives at `dst`."""

    src: int
    dst: int
    message: Any


@dataclass(frozen=True, slots=True)
class TimerFired:
    """`node`'s core deadline (next_deadline_ms) is due. Stale when `generation` is old."""

    node: int
    generation: int


@dataclass(frozen=True, slots=True)
class ConnectionRefused:
    """`node` learns that `peer` refused a connection (its process is down): TCP RST."""

    node: int
    peer: int


@dataclass(frozen=True, slots=True)
class NemesisStep:
    """The nemesis picks and applies its next fault (or heal)."""


@dataclass(frozen=True, slots=True)
class VoterChangeStep:
    """The operator asks the leader to add or remove one voter (KIP-853; membership runs)."""


@dataclass(frozen=True, slots=True)
class Resume:
    """A paused node continues (SIGCONT): buffered deliveries run, its timer is re-armed."""

    node: int
    pause_id: int


@dataclass(frozen=True, slots=True)
class ClientStep:
    """Client `process` invokes its next operation."""

    process: int


@dataclass(frozen=True, slots=True)
class ClientRequest:
    """Client `process`'s operation `op_index` reaches `node`."""

    process: int
    node: int
    op_index: int


@dataclass(frozen=True, slots=True)
class ClientReply:
    """A reply reaches client `process` for operation `op_index`."""

    process: int
    op_index: int
    type: str  # ok | fail | info
    value: Any
    leader_hint: int | None
    error: str | None = None  # Kafka error name (CAS_FAILED, NOT_LEADER_OR_FOLLOWER, ...)


@dataclass(frozen=True, slots=True)
class ClientTimeout:
    """Client `process` gives up waiting for operation `op_index` (outcome unknown: info)."""

    process: int
    op_index: int


@dataclass(frozen=True, slots=True)
class Snapshot:
    """`node` snapshots its metadata image at its applied offset (KIP-630: every node snapshots
    its own state at a committed offset)."""

    node: int


@dataclass(frozen=True, slots=True)
class PhaseChange:
    """The safety phase ends: faults stop and the liveness phase begins."""

    phase: str


@dataclass(frozen=True, slots=True)
class LivenessProbe:
    """During the liveness phase: check progress (leader, marker committed, convergence)."""


@dataclass(frozen=True, slots=True, repr=False)
class Call:
    """An actor's own scheduled work: `fn(*args)` runs when the event pops."""

    fn: Callable[..., None]
    args: tuple[Any, ...] = field(default=())

    def __repr__(self) -> str:
        name = getattr(self.fn, "__qualname__", type(self.fn).__name__)
        return f"Call({name}{self.args!r})"


Event = (
    Deliver
    | Call
    | TimerFired
    | ConnectionRefused
    | NemesisStep
    | VoterChangeStep
    | Resume
    | ClientStep
    | ClientRequest
    | ClientReply
    | ClientTimeout
    | Snapshot
    | PhaseChange
    | LivenessProbe
)


class EventQueue:
    """A priority queue of events keyed by (time_ms, seq); `now_ms` is the run's clock."""

    __slots__ = ("_heap", "_seq", "events", "now_ms")

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, Event]] = []
        self._seq = 0
        self.now_ms = 0
        self.events = 0  # events popped so far

    def schedule(self, at_ms: int, event: Event) -> None:
        if at_ms < self.now_ms:
            raise ValueError(
                f"event {event!r} scheduled at {at_ms} ms, before now {self.now_ms} ms"
            )
        self._seq += 1
        heapq.heappush(self._heap, (at_ms, self._seq, event))

    def call_at(self, at_ms: int, fn: Callable[..., None], *args: Any) -> None:
        """Schedule `fn(*args)` at `at_ms` (refused, like any event, before `now_ms`)."""
        self.schedule(at_ms, Call(fn, args))

    def pop(self) -> tuple[int, Event]:
        at_ms, _, event = heapq.heappop(self._heap)
        self.now_ms = at_ms
        SIM_CLOCK.now_ms = at_ms
        self.events += 1
        return at_ms, event

    def advance_to(self, at_ms: int) -> None:
        """Let time pass with nothing happening: the clock moves to `at_ms` if that is later.
        Only valid when no event is due before `at_ms` (they would then run in the past)."""
        head = self.peek_time_ms()
        if head is not None and head < at_ms:
            raise ValueError(f"advancing to {at_ms} ms would skip an event at {head} ms")
        self.now_ms = max(self.now_ms, at_ms)

    def peek_time_ms(self) -> int | None:
        return self._heap[0][0] if self._heap else None

    def __len__(self) -> int:
        return len(self._heap)
