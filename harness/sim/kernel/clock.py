"""The simulated time of the running event, for what lives outside a run's objects: log lines.

A run's own code reads time from its event queue (`EventQueue.now_ms`, harness.sim.kernel.events),
which is the one clock of that run: it advances only as events are popped, never backwards, and
nothing in a simulated run reads the wall clock. The queue mirrors each popped event's time into
`SIM_CLOCK`, which the structlog processor of harness.sim.runs.runner stamps on every line
(`sim_ms`), so a seed's log is byte-identical run to run.

Invariant: one run at a time per process (runs fan out over processes, never threads), so the
mirror always holds the time of the event being run.
"""

from __future__ import annotations


class SimClock:
    """A simulated time in integer milliseconds."""

    __slots__ = ("now_ms",)

    def __init__(self) -> None:
        self.now_ms = 0


SIM_CLOCK = SimClock()
