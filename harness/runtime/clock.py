"""The clock one node process runs on: the cores' `now_ms` and the wall clock of its timestamps,
both skewable at run time by the clock nemesis (docs/jepsen.md "Clock faults").

A node reads time only here. `now_ms()` is the event loop's monotonic clock in ms, plus an
offset, advancing at `rate` (1.0: in step with the machine); `wall_ms()` is the machine's Unix
time moved by the same skew. Timers of the cores are armed in core time (`call_at(deadline_ms)`):
the clock converts a deadline to loop time and, when the skew changes, re-arms every timer it
holds, so a jump forward fires what became due at once and a slower rate fires later.

Invariants:
- `now_ms()` never goes backwards, even across a jump back: the reading is held at its highest
  value until the skewed clock passes it again. This is what Kafka's own timers do with a clock
  that steps back (`org.apache.kafka.common.utils.Timer#update` keeps the larger of the old and
  new time): a jump back delays every timeout by the jump, and no core ever sees time reverse.
  The wall clock is not held: a real wall clock does step back (record timestamps may too).
- A rate is positive and finite; a jump or a new rate keeps the skewed reading continuous
  except for the jump itself (the mapping is re-anchored at the moment of the change).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from typing import Any

MAX_RATE = 100.0  # a rate far outside anything a drifting crystal does is a typo


class ClockError(ValueError):
    """A clock setting the clock cannot take (rate not positive, not finite)."""


class ClockTimer:
    """A timer armed in core time; `cancel()` like asyncio's TimerHandle."""

    __slots__ = ("_args", "_callback", "_clock", "_handle", "deadline_ms")

    def __init__(self, clock: NodeClock, deadline_ms: int, callback: Callable[..., Any],
                 args: tuple[Any, ...]) -> None:
        self._clock = clock
        self.deadline_ms = deadline_ms
        self._callback = callback
        self._args = args
        self._handle: asyncio.TimerHandle | None = None

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        self._clock._timers.discard(self)

    def _arm(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
        loop = self._clock.loop
        self._handle = loop.call_at(self._clock.loop_time_s(self.deadline_ms), self._fire)

    def _fire(self) -> None:
        self._handle = None
        self._clock._timers.discard(self)
        self._callback(*self._args)


class NodeClock:
    """Loop clock and wall clock of one process, with an offset and a rate the nemesis sets."""

    def __init__(self, loop: asyncio.AbstractEventLoop,
                 wall_s: Callable[[], float] = time.time) -> None:
        self.loop = loop
        self._wall_s = wall_s
        self.rate = 1.0
        self._anchor_loop_s = loop.time()
        self._anchor_ms = self._anchor_loop_s * 1000  # the skewed reading at the anchor
        self._last_ms = int(self._anchor_ms)
        self._timers: set[ClockTimer] = set()
        self.jumps = 0  # changes applied (the status says whether a node was ever skewed)

    # --- readings -------------------------------------------------------------------------

    def _raw_ms(self, loop_s: float) -> float:
        return self._anchor_ms + (loop_s - self._anchor_loop_s) * 1000 * self.rate

    def now_ms(self) -> int:
        """The cores' clock: monotonic, skewed (held at its highest reading after a jump back)."""
        # `_raw_ms` written out (read several times per input): + 1 us, because a timer armed
        # for D fires at the float loop time of D, which may read D - 1e-9.
        ms = int(self._anchor_ms + (self.loop.time() - self._anchor_loop_s) * 1000 * self.rate + 1e-3)
        if ms > self._last_ms:
            self._last_ms = ms
        return self._last_ms

    def skew_ms(self) -> float:
        """How far this clock is from the machine's right now (positive: ahead)."""
        loop_s = self.loop.time()
        return self._raw_ms(loop_s) - loop_s * 1000

    def wall_now_ms(self) -> int:
        """Unix epoch ms as this process sees it (the machine's, moved by the skew)."""
        return int(self._wall_s() * 1000 + self.skew_ms())

    def wall_ms(self, mono_ms: int) -> int:
        """A reading of `now_ms()` as Unix epoch ms, for the API (KIP-836 timestamps)."""
        return self.wall_now_ms() - (self.now_ms() - mono_ms)

    def loop_time_s(self, deadline_ms: int) -> float:
        """When, in loop time, `now_ms()` reaches `deadline_ms` (now, if it already has)."""
        now_s = self.loop.time()
        if deadline_ms <= self.now_ms():
            return now_s
        return max(now_s, self._anchor_loop_s + (deadline_ms - self._anchor_ms) / 1000 / self.rate)

    # --- timers ---------------------------------------------------------------------------

    def call_at(self, deadline_ms: int, callback: Callable[..., Any], *args: Any) -> ClockTimer:
        """Run `callback(*args)` once `now_ms()` reaches `deadline_ms`."""
        timer = ClockTimer(self, deadline_ms, callback, args)
        self._timers.add(timer)
        timer._arm()
        return timer

    # --- the nemesis ----------------------------------------------------------------------

    def jump(self, delta_ms: int) -> None:
        """Step the clock by `delta_ms` (negative: back; now_ms() then holds, see the module)."""
        self._reanchor()
        self._anchor_ms += delta_ms
        self._changed()

    def set_rate(self, rate: float) -> None:
        """Run at `rate` times the machine's speed from now on (a drifting clock)."""
        if not (math.isfinite(rate) and 0 < rate <= MAX_RATE):
            raise ClockError(f"rate must be in (0, {MAX_RATE:g}], got {rate!r}")
        self._reanchor()
        self.rate = rate
        self._changed()

    def reset(self) -> None:
        """Back in step with the machine (offset 0, rate 1): a jump by minus the skew."""
        self._reanchor()
        self.rate = 1.0
        self._anchor_ms = self._anchor_loop_s * 1000
        self._changed()

    def _reanchor(self) -> None:
        self.now_ms()  # the reading a jump back holds at is the clock's value at the jump
        loop_s = self.loop.time()
        self._anchor_ms = self._raw_ms(loop_s)
        self._anchor_loop_s = loop_s

    def _changed(self) -> None:
        self.jumps += 1
        for timer in list(self._timers):
            timer._arm()

    def to_json(self) -> dict[str, Any]:
        return {"skew_ms": round(self.skew_ms(), 3), "rate": self.rate,
                "now_ms": self.now_ms(), "wall_ms": self.wall_now_ms(), "changes": self.jumps}
