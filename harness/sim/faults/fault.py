"""What a fault acts on and the context one fault runs in (harness.sim.faults.shapes).

`FaultTarget` is what every simulated run offers the nemesis: its processes by role (controllers,
then brokers; clients on the network), their state, the operations a fault performs on a
process (power loss, SIGKILL, graceful stop, restart, SIGSTOP/SIGCONT), the metadata quorum as a
whole, and the kernel (network, event queue). A run that has no partition (the quorum run) says
so: `partition_leader()` is None there, and no shape that needs one is drawn.

`Fault` is one application of a shape: the target, the nemesis' rng, when it starts and, for a
fault with a duration, when it ends. A shape applies itself at once and schedules what it does
later through the Fault (`at`, `until`), which also records the timeline (`Span`s) the run
summary reports.

Invariants: every random choice of a shape draws from `Fault.rng` over node lists in a fixed
order (ids sorted by role), so one seed gives one fault schedule; an instant fault (no end) never
schedules a heal (a later nemesis step heals).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from harness.sim.kernel.events import EventQueue
from harness.sim.kernel.network import SimNetwork


@dataclass(frozen=True, slots=True)
class Shape:
    """A fault shape (harness.sim.faults.shapes.SHAPES): its kind (the group a run may ask
    for), the function that applies it, and how long after the fault's end its last action (a
    restart) comes."""

    kind: str
    apply: Callable[[Fault], str]
    after_end_ms: int = 0


@dataclass(frozen=True, slots=True)
class Span:
    """A stretch of the fault timeline: [start_ms, end_ms) of one kind (partition, kill, ...)."""

    start_ms: int
    end_ms: int
    kind: str


class FaultTarget(Protocol):
    """What the nemesis needs from a simulated run."""

    network: SimNetwork
    queue: EventQueue

    @property
    def node_ids(self) -> Sequence[int]:
        """Controllers, then brokers, in id order."""
        ...

    @property
    def controller_ids(self) -> Sequence[int]: ...

    @property
    def broker_ids(self) -> Sequence[int]: ...

    @property
    def client_ids(self) -> Sequence[int]:
        """Clients on the simulated network (the nemesis may cut them off)."""
        ...

    def is_up(self, node_id: int) -> bool: ...

    def is_paused(self, node_id: int) -> bool: ...

    def active_controller(self) -> int | None:
        """The live controller leading the highest epoch (None: none leads)."""
        ...

    def partition_leader(self) -> int | None:
        """The committed image's leader of the data partition (None: none, or no data plane)."""
        ...

    def crash(self, node_id: int) -> None:
        """Power loss: the process stops and its unsynced writes are lost."""
        ...

    def kill(self, node_id: int) -> None:
        """SIGKILL: the process stops; the page cache survives, nothing written is lost."""
        ...

    def shutdown(self, node_id: int) -> None:
        """Graceful stop: a leader resigns, everything is flushed, the process exits."""
        ...

    def restart(self, node_id: int) -> None:
        """Start the stopped process again (recovering from its disk)."""
        ...

    def pause(self, node_id: int, duration_ms: int | None) -> None:
        """SIGSTOP: no deliveries, no timers; for `duration_ms`, or until `resume` if None."""
        ...

    def resume(self, node_id: int) -> None: ...

    def jump_clock(self, node_id: int, delta_ms: int) -> bool:
        """Step the process's clock by `delta_ms` (negative: back); it holds its highest
        reading, so no process ever sees time reverse (harness.sim.actors.skewed_clock).
        False if the process has no clock of its own (nothing done)."""
        ...

    def metadata_quorum_down(self) -> list[int]:
        """Make the metadata quorum unavailable; the controllers taken down."""
        ...

    def metadata_quorum_up(self) -> None: ...


class Fault:
    """One fault being applied: target, rng, [start_ms, end_ms) (end None: an instant fault)."""

    __slots__ = ("end_ms", "heal_ms", "max_pause_ms", "rng", "start_ms", "target", "timeline")

    def __init__(
        self,
        target: FaultTarget,
        rng: random.Random,
        end_ms: int | None = None,
        max_pause_ms: int = 600,
    ) -> None:
        self.target = target
        self.rng = rng
        self.start_ms = target.queue.now_ms
        self.end_ms = end_ms
        self.max_pause_ms = max_pause_ms
        self.timeline: list[Span] = []
        self.heal_ms: int | None = None

    def at(self, at_ms: int, fn: Callable[..., None], *args: Any) -> None:
        """Do `fn(*args)` at `at_ms` (a later stage of this fault)."""
        self.target.queue.call_at(at_ms, fn, *args)

    def until(self, heal: Callable[[], None], kind: str, at_ms: int | None = None) -> None:
        """The fault lasts until `at_ms` (default: its end), when `heal` undoes it. Nothing for
        an instant fault."""
        end = self.end_ms if at_ms is None else at_ms
        if end is None:
            return
        self.timeline.append(Span(self.start_ms, end, kind))
        self.at(end, heal)
        self.heal_ms = max(self.heal_ms or 0, end)

    def stop_until_end(self, victims: list[int], stop: Callable[[int], None], kind: str) -> str:
        """`stop` (the target's kill or crash) each of `victims` now, restart them all at the
        fault's end; what the fault did, for its row."""
        for v in victims:
            stop(v)

        def restart_all() -> None:
            for v in victims:
                self.target.restart(v)

        self.until(restart_all, kind)
        return f"broker {victims[0]}" if len(victims) == 1 else f"brokers {victims}"

    def heal_network(self) -> None:
        self.target.network.heal()

    def partition_leader(self) -> int:
        """The data partition's leader, or the lowest broker id when none is known."""
        leader = self.target.partition_leader()
        return leader if leader is not None else min(self.target.broker_ids)

    def followers(self, leader: int) -> list[int]:
        return [b for b in self.target.broker_ids if b != leader]
