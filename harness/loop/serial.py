"""Deferred work on an asyncio event loop: the shapes the asyncio runtime (harness/runtime,
harness/net) needs, each written once instead of by hand with its own flag.

- `Soon`: one callback, run on the loop's next pass, scheduled at most once until it has run
  (coalescing: a thousand sends in one pass cost one flush). A holder that runs it itself at a
  point of its own (the transport at the end of a delivery) `claim`s it instead and later
  `run_pending`s it.
- `Serial`: work items handled one at a time, in order, never re-entered: an item submitted
  while another is being handled (a core's effect that feeds the same core) is queued and
  handled after it, in the same drain; `after` runs once the queue is empty (re-arm the core's
  timer). Submitting outside a drain handles the item at once, synchronously.
- `Timer`: one re-armable deadline on a clock: the loop's (`LoopTime`, real elapsed time) or a
  node's skewable core clock (harness/runtime/clock.py). Arming replaces the previous deadline;
  `set` follows a core's `next_deadline_ms()` (None: no deadline) and keeps a timer already armed
  for that deadline.
- `run_soon`, `run_later`: one-shot calls with arguments (each call its own, nothing coalesced).

Invariants:
- Every shape takes `on_error`, required: what an exception raised by the deferred work means.
  The runtime passes its node's crash (a bug or a broken invariant stops the process, as on
  its main paths); an exception never reaches asyncio's default handler, which would log it
  and let the node run on with its state half updated.
- A cancelled `Soon` or `Timer` never calls back (until scheduled or armed again), and one
  that has called back is no longer pending or armed when its callback runs: the callback may
  schedule or arm it again.
- `Serial` handles items in submission order, one at a time; when `on_error` returns (it does
  not for a crash), the drain goes on with the next item.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

T = TypeVar("T")

OnError = Callable[[Exception], object]


class Cancellable(Protocol):
    def cancel(self) -> None: ...


class TimerClock(Protocol):
    """A clock timers are armed on: a reading in ms and a one-shot call at a reading."""

    def now_ms(self) -> float: ...

    def call_at(self, deadline_ms: float, callback: Callable[[], object]) -> Cancellable: ...


class LoopTime:
    """The event loop's own clock (`loop.time()`) in ms: for timers that follow real elapsed time
    (periodic housekeeping, request timeouts), never moved by a node's clock skew."""

    __slots__ = ("loop",)

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop

    def now_ms(self) -> float:
        return self.loop.time() * 1000

    def call_at(self, deadline_ms: float, callback: Callable[[], object]) -> asyncio.TimerHandle:
        return self.loop.call_at(deadline_ms / 1000, callback)


class Soon:
    """One callback run on the loop's next pass, scheduled at most once until it has run."""

    __slots__ = ("_callback", "_claimed", "_handle", "_loop", "_on_error")

    def __init__(self, loop: asyncio.AbstractEventLoop, callback: Callable[[], object], *,
                 on_error: OnError) -> None:
        self._loop = loop
        self._callback = callback
        self._on_error = on_error
        self._handle: asyncio.Handle | None = None
        self._claimed = False

    @property
    def pending(self) -> bool:
        """Scheduled on the loop, or claimed by a holder that will run it."""
        return self._handle is not None or self._claimed

    def schedule(self) -> None:
        """Run the callback on the loop's next pass, unless a pass is already asked for."""
        if self._handle is None:
            self._handle = self._loop.call_soon(self._fire)

    def claim(self) -> bool:
        """Make it pending without asking the loop: the caller runs it (`run_pending`) at a
        point it controls. True if it was not pending before (the caller then remembers it)."""
        if self._handle is not None or self._claimed:
            return False
        self._claimed = True
        return True

    def run_pending(self) -> None:
        """Run the callback now if it is pending; the loop's pass asked for is dropped."""
        if self._handle is not None or self._claimed:
            self.run_now()

    def run_now(self) -> None:
        """Run the callback now, pending or not; it is no longer pending when it runs."""
        self.cancel()
        try:
            self._callback()
        except Exception as exc:
            self._on_error(exc)

    def cancel(self) -> None:
        """No longer pending: the callback does not run (until scheduled again)."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        self._claimed = False

    def _fire(self) -> None:
        self._handle = None
        self.run_now()


class Serial(Generic[T]):
    """Items handled one at a time by `handle`, in submission order, never re-entered."""

    __slots__ = ("_after", "_draining", "_handle", "_on_error", "_queue")

    def __init__(self, handle: Callable[[T], object], *, on_error: OnError,
                 after: Callable[[], object] | None = None) -> None:
        self._handle = handle
        self._on_error = on_error
        self._after = after
        self._queue: deque[T] = deque()
        self._draining = False

    @property
    def busy(self) -> bool:
        """An item is being handled right now (a submit queues behind it)."""
        return self._draining

    def submit(self, item: T) -> None:
        """Handle `item` now, then whatever it (re-entrantly) submitted, then run `after`. Inside
        a drain, queue it: it is handled after the current item, in the same drain."""
        if self._draining:
            self._queue.append(item)
            return
        self._draining = True
        queue = self._queue
        try:
            while True:
                try:
                    self._handle(item)
                except Exception as exc:
                    self._on_error(exc)
                if not queue:
                    break
                item = queue.popleft()
        finally:
            self._draining = False
        if self._after is not None:
            try:
                self._after()
            except Exception as exc:
                self._on_error(exc)


class Timer:
    """One deadline on `clock`; arming it again replaces the previous one."""

    __slots__ = ("_callback", "_clock", "_deadline_ms", "_handle", "_on_error", "fired_deadline_ms")

    def __init__(self, clock: TimerClock, callback: Callable[[], object], *,
                 on_error: OnError) -> None:
        self._clock = clock
        self._callback = callback
        self._on_error = on_error
        self._handle: Cancellable | None = None
        self._deadline_ms: float | None = None
        # The deadline of the last firing (what the callback was due at; its clock may read a
        # hair less when it runs).
        self.fired_deadline_ms: float | None = None

    @property
    def armed(self) -> bool:
        return self._handle is not None

    @property
    def deadline_ms(self) -> float | None:
        """The deadline it is armed for (None: not armed)."""
        return self._deadline_ms

    def arm(self, deadline_ms: float, *, not_before_ms: float | None = None) -> None:
        """Fire at `deadline_ms` on the clock, or at `not_before_ms` if that is later (a deadline
        already past then fires on a later pass, not at once), replacing any earlier arming.
        `deadline_ms` reads back the deadline asked for."""
        if self._handle is not None:
            self._handle.cancel()
        self._deadline_ms = deadline_ms
        at_ms = deadline_ms if not_before_ms is None else max(deadline_ms, not_before_ms)
        self._handle = self._clock.call_at(at_ms, self._fire)

    def arm_in(self, delay_ms: float) -> None:
        """Fire `delay_ms` from now on the clock, replacing any earlier arming."""
        self.arm(self._clock.now_ms() + delay_ms)

    def set(self, deadline_ms: float | None, *, not_before_ms: float | None = None) -> None:
        """Follow a core's next deadline: armed for `deadline_ms`, or not at all for None. A
        timer armed for that very deadline already is kept (no cancel and re-arm per input)."""
        if deadline_ms == self._deadline_ms:
            return
        if deadline_ms is None:
            self.cancel()
        else:
            self.arm(deadline_ms, not_before_ms=not_before_ms)

    def cancel(self) -> None:
        """Not armed any more: the callback does not run (until armed again)."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        self._deadline_ms = None

    def _fire(self) -> None:
        self.fired_deadline_ms = self._deadline_ms
        self._handle = None
        self._deadline_ms = None
        try:
            self._callback()
        except Exception as exc:
            self._on_error(exc)


def _guarded(fn: Callable[..., object], args: tuple[Any, ...], on_error: OnError) -> None:
    try:
        fn(*args)
    except Exception as exc:
        on_error(exc)


def run_soon(loop: asyncio.AbstractEventLoop, fn: Callable[..., object], *args: Any,
             on_error: OnError) -> asyncio.Handle:
    """`fn(*args)` on the loop's next pass (every call its own); errors go to `on_error`."""
    return loop.call_soon(_guarded, fn, args, on_error)


def run_later(loop: asyncio.AbstractEventLoop, delay_ms: float, fn: Callable[..., object],
              *args: Any, on_error: OnError) -> asyncio.TimerHandle:
    """`fn(*args)` once `delay_ms` of loop time passed (a request's timeout, a delayed frame);
    errors go to `on_error`. The handle cancels it."""
    return loop.call_later(delay_ms / 1000, _guarded, fn, args, on_error)


__all__ = ["Cancellable", "LoopTime", "OnError", "Serial", "Soon", "Timer", "TimerClock",
           "run_later", "run_soon"]
