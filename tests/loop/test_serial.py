"""harness/loop/serial.py on a real asyncio loop, driven deterministically: the loop runs until a
small coroutine returns, which yields with `asyncio.sleep(0)` (one pass of the loop), and timers
are armed on a hand-driven clock whose `advance` fires what became due."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator

import pytest

from harness.loop import LoopTime, Serial, Soon, Timer, run_later, run_soon


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


def passes(loop: asyncio.AbstractEventLoop, n: int = 1) -> None:
    """Let the loop run at least `n` passes (what call_soon scheduled before them has run)."""

    async def turn() -> None:
        for _ in range(n):
            await asyncio.sleep(0)

    loop.run_until_complete(turn())


class Errors(list[Exception]):
    """An on_error that records instead of crashing."""

    def __call__(self, exc: Exception) -> None:
        self.append(exc)


class HandClock:
    """A TimerClock driven by hand: `advance` fires, in deadline order, what became due."""

    def __init__(self) -> None:
        self.now = 0.0
        self._due: list[tuple[float, int, Callable[[], object], list[bool]]] = []
        self._seq = 0

    def now_ms(self) -> float:
        return self.now

    def call_at(self, deadline_ms: float, callback: Callable[[], object]) -> HandClock.Handle:
        self._seq += 1
        cancelled = [False]
        self._due.append((deadline_ms, self._seq, callback, cancelled))
        return HandClock.Handle(cancelled)

    class Handle:
        def __init__(self, cancelled: list[bool]) -> None:
            self._cancelled = cancelled

        def cancel(self) -> None:
            self._cancelled[0] = True

    @property
    def live(self) -> int:
        return sum(1 for *_, c in self._due if not c[0])

    def advance(self, ms: float) -> None:
        self.now += ms
        while True:
            due = sorted((d for d in self._due if d[0] <= self.now and not d[3][0]),
                         key=lambda d: d[:2])  # fmt: skip
            if not due:
                return
            entry = due[0]
            self._due.remove(entry)
            entry[2]()


# --- Soon -----------------------------------------------------------------------------------------


def test_soon_runs_once_per_pass_however_often_it_is_scheduled(loop: asyncio.AbstractEventLoop) -> None:
    runs: list[int] = []
    soon = Soon(loop, lambda: runs.append(1), on_error=Errors())
    for _ in range(5):
        soon.schedule()
    assert soon.pending and runs == []  # nothing runs synchronously
    passes(loop)
    assert runs == [1] and not soon.pending
    soon.schedule()  # after it ran, a new schedule is a new run
    passes(loop)
    assert runs == [1, 1]


def test_soon_scheduled_from_its_own_callback_runs_again_on_a_later_pass(
    loop: asyncio.AbstractEventLoop,
) -> None:
    runs: list[int] = []

    def again() -> None:
        assert not soon.pending  # no longer pending while it runs
        runs.append(len(runs))
        if len(runs) < 3:
            soon.schedule()
            assert runs[-1] == len(runs) - 1  # not re-entered: the next run is a later pass

    soon = Soon(loop, again, on_error=Errors())
    soon.schedule()
    passes(loop, 5)
    assert runs == [0, 1, 2] and not soon.pending


def test_a_cancelled_soon_never_calls_back(loop: asyncio.AbstractEventLoop) -> None:
    runs: list[int] = []
    soon = Soon(loop, lambda: runs.append(1), on_error=Errors())
    soon.schedule()
    soon.cancel()
    assert not soon.pending
    passes(loop, 3)
    assert runs == []


def test_soon_claimed_runs_when_its_holder_says_and_not_on_the_loop(
    loop: asyncio.AbstractEventLoop,
) -> None:
    runs: list[int] = []
    soon = Soon(loop, lambda: runs.append(1), on_error=Errors())
    assert soon.claim() is True
    assert soon.claim() is False  # pending already: the holder remembered it the first time
    passes(loop)
    assert runs == [] and soon.pending
    soon.run_pending()
    assert runs == [1] and not soon.pending
    soon.run_pending()  # not pending: nothing
    assert runs == [1]


def test_soon_run_now_drops_the_pass_it_asked_for(loop: asyncio.AbstractEventLoop) -> None:
    runs: list[int] = []
    soon = Soon(loop, lambda: runs.append(1), on_error=Errors())
    soon.schedule()
    soon.run_now()
    assert runs == [1] and not soon.pending
    passes(loop, 2)
    assert runs == [1]  # the scheduled pass was cancelled
    assert soon.claim() is True  # and a schedule while claimed still asks the loop
    soon.schedule()
    passes(loop)
    assert runs == [1, 1] and not soon.pending


def test_soon_errors_go_to_on_error_not_to_the_loop(loop: asyncio.AbstractEventLoop) -> None:
    errors = Errors()
    swallowed: list[object] = []
    loop.set_exception_handler(lambda _loop, context: swallowed.append(context))
    soon = Soon(loop, lambda: 1 // 0, on_error=errors)
    soon.schedule()
    passes(loop)
    assert [type(e) for e in errors] == [ZeroDivisionError]
    assert swallowed == [] and not soon.pending


# --- Serial ---------------------------------------------------------------------------------------


def test_serial_handles_items_at_once_and_in_order() -> None:
    seen: list[str] = []
    afters: list[list[str]] = []
    serial: Serial[str] = Serial(seen.append, on_error=Errors(),
                                 after=lambda: afters.append(list(seen)))  # fmt: skip
    serial.submit("a")
    serial.submit("b")
    assert seen == ["a", "b"]  # synchronous outside a drain
    assert afters == [["a"], ["a", "b"]]  # `after` once per drain
    assert not serial.busy


def test_serial_is_not_re_entered() -> None:
    seen: list[str] = []
    depth = [0]
    afters: list[list[str]] = []

    def handle(item: str) -> None:
        depth[0] += 1
        assert depth[0] == 1, "re-entered"
        assert serial.busy
        seen.append(item)
        if item == "a":  # an effect of "a" feeds the same core twice
            serial.submit("a1")
            serial.submit("a2")
            assert seen == ["a"]  # queued, not handled inside "a"
        if item == "a1":
            serial.submit("a1x")
        depth[0] -= 1

    serial: Serial[str] = Serial(handle, on_error=Errors(), after=lambda: afters.append(list(seen)))
    serial.submit("a")
    # Submitted while draining: after the current item, in the same drain, in order.
    assert seen == ["a", "a1", "a2", "a1x"]
    assert afters == [seen]  # one drain, one `after`


def test_serial_errors_go_to_on_error_and_the_drain_goes_on() -> None:
    errors = Errors()
    seen: list[int] = []

    def handle(item: int) -> None:
        if item == 1:
            serial.submit(2)
            raise ValueError("broken invariant")
        seen.append(item)

    serial: Serial[int] = Serial(handle, on_error=errors)
    serial.submit(1)
    assert [str(e) for e in errors] == ["broken invariant"]
    assert seen == [2] and not serial.busy
    serial.submit(3)
    assert seen == [2, 3]


def test_serial_after_errors_go_to_on_error() -> None:
    errors = Errors()
    serial: Serial[int] = Serial(lambda _: None, on_error=errors, after=lambda: 1 // 0)
    serial.submit(1)
    assert [type(e) for e in errors] == [ZeroDivisionError]


# --- Timer ----------------------------------------------------------------------------------------


def test_timer_fires_at_its_deadline_once() -> None:
    clock = HandClock()
    fired: list[float] = []
    timer = Timer(clock, lambda: fired.append(clock.now), on_error=Errors())
    assert not timer.armed and timer.deadline_ms is None
    timer.arm(100)
    assert timer.armed and timer.deadline_ms == 100
    clock.advance(99)
    assert fired == []
    clock.advance(1)
    assert fired == [100] and not timer.armed and timer.deadline_ms is None
    assert timer.fired_deadline_ms == 100
    clock.advance(1000)
    assert fired == [100]


def test_timer_re_arm_replaces_the_previous_deadline() -> None:
    clock = HandClock()
    fired: list[float] = []
    timer = Timer(clock, lambda: fired.append(clock.now), on_error=Errors())
    timer.arm(100)
    timer.arm(300)  # later: the first deadline is gone
    clock.advance(200)
    assert fired == []
    timer.arm(250)  # earlier again
    assert clock.live == 1
    clock.advance(100)
    assert fired == [300]
    timer.arm_in(40)
    clock.advance(40)
    assert fired == [300, 340]


def test_timer_not_before_delays_a_past_deadline_but_reports_it() -> None:
    clock = HandClock()
    clock.now = 500
    fired: list[float] = []
    timer = Timer(clock, lambda: fired.append(clock.now), on_error=Errors())
    timer.arm(100, not_before_ms=501)
    assert timer.deadline_ms == 100
    clock.advance(0)
    assert fired == []
    clock.advance(1)
    assert fired == [501]


def test_timer_set_follows_a_core_deadline_and_keeps_an_equal_one() -> None:
    clock = HandClock()
    fired: list[float] = []
    timer = Timer(clock, lambda: fired.append(clock.now), on_error=Errors())
    timer.set(None)
    assert not timer.armed and clock.live == 0
    timer.set(100)
    timer.set(100)  # same deadline: kept, not cancelled and re-armed
    assert clock.live == 1 and len(clock._due) == 1
    timer.set(None)  # no deadline any more
    assert not timer.armed
    clock.advance(200)
    assert fired == []
    timer.set(300)
    clock.advance(100)
    assert fired == [300]


def test_a_cancelled_timer_never_calls_back() -> None:
    clock = HandClock()
    fired: list[float] = []
    timer = Timer(clock, lambda: fired.append(clock.now), on_error=Errors())
    timer.arm(10)
    timer.cancel()
    assert not timer.armed and timer.deadline_ms is None
    clock.advance(100)
    assert fired == []


def test_a_periodic_timer_re_arms_from_its_callback() -> None:
    clock = HandClock()
    fired: list[float] = []

    def tick() -> None:
        assert not timer.armed  # no longer armed inside its own callback
        fired.append(clock.now)
        timer.arm_in(10)

    timer = Timer(clock, tick, on_error=Errors())
    timer.arm_in(10)
    for _ in range(3):
        clock.advance(10)
    assert fired == [10, 20, 30] and timer.deadline_ms == 40


def test_timer_errors_go_to_on_error() -> None:
    clock = HandClock()
    errors = Errors()
    timer = Timer(clock, lambda: 1 // 0, on_error=errors)
    timer.arm(1)
    clock.advance(1)
    assert [type(e) for e in errors] == [ZeroDivisionError] and not timer.armed


def test_timer_on_the_loop_clock(loop: asyncio.AbstractEventLoop) -> None:
    fired = loop.create_future()
    errors = Errors()
    timer = Timer(LoopTime(loop), lambda: fired.set_result(loop.time()), on_error=errors)
    start = loop.time()
    timer.arm_in(5)
    assert timer.deadline_ms is not None and timer.deadline_ms >= start * 1000 + 5
    assert loop.run_until_complete(fired) >= start + 0.005
    assert errors == [] and not timer.armed

    cancelled: list[int] = []
    timer = Timer(LoopTime(loop), lambda: cancelled.append(1), on_error=errors)
    timer.arm_in(1)
    timer.cancel()
    later = loop.create_future()
    loop.call_later(0.01, later.set_result, None)
    loop.run_until_complete(later)
    assert cancelled == []


# --- run_soon / run_later -------------------------------------------------------------------------


def test_run_soon_runs_each_call_in_order_and_routes_errors(loop: asyncio.AbstractEventLoop) -> None:
    errors = Errors()
    seen: list[int] = []
    run_soon(loop, seen.append, 1, on_error=errors)
    run_soon(loop, lambda: 1 // 0, on_error=errors)
    run_soon(loop, seen.append, 2, on_error=errors)
    assert seen == []
    passes(loop)
    assert seen == [1, 2] and [type(e) for e in errors] == [ZeroDivisionError]


def test_run_later_fires_after_its_delay_unless_cancelled(loop: asyncio.AbstractEventLoop) -> None:
    errors = Errors()
    done = loop.create_future()
    seen: list[str] = []
    handle = run_later(loop, 1, seen.append, "cancelled", on_error=errors)
    handle.cancel()
    run_later(loop, 2, lambda: 1 // 0, on_error=errors)
    run_later(loop, 3, done.set_result, "fired", on_error=errors)
    assert loop.run_until_complete(done) == "fired"
    assert seen == [] and [type(e) for e in errors] == [ZeroDivisionError]
