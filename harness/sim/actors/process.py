"""The process state every actor carries for the World (harness/sim/runs/world.py): whether the
process runs (`up`) or is stopped by SIGSTOP (`paused`, `pause_id` naming the pause a Resume
ends), the events held while paused (`buffered`), what it sends after its input (`outbox`), its
armed timer (`armed_deadline_ms`, `timer_generation`: a TimerFired of an older generation is
stale) and its process starts (`incarnation`).

Invariants: a stopped process holds nothing (no buffered events, no outbox) and no timer of an
earlier process start can fire (`process_stopped` moves the generation on); a pause's id grows
with every pause, so a Resume of an earlier pause does nothing.
"""

from __future__ import annotations

from typing import Any


class SimProcess:
    """The World's view of one actor's process (module docstring). An actor calls
    `init_process` in its constructor, `process_started` and `process_stopped` in its
    lifecycle; `pause` is the World's."""

    def init_process(self) -> None:
        self.up = False
        self.paused = False
        self.pause_id = 0
        self.incarnation = 0
        self.buffered: list[Any] = []  # the World's events held while paused
        self.outbox: list[tuple[int, Any]] = []
        self.timer_generation = 0
        self.armed_deadline_ms: int | None = None

    def process_started(self) -> None:
        """A process start: running, not paused, one more incarnation."""
        self.up, self.paused = True, False
        self.incarnation += 1

    def process_stopped(self) -> None:
        """The process is gone: nothing held, nothing to send, its timer never fires."""
        self.up, self.paused = False, False
        self.buffered, self.outbox = [], []
        self.timer_generation += 1
        self.armed_deadline_ms = None

    def pause(self) -> int:
        """SIGSTOP: the World holds its events until the Resume of the id returned."""
        self.paused = True
        self.pause_id += 1
        return self.pause_id
