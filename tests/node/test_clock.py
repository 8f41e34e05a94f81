"""The node clock (harness/runtime/clock.py) on a hand-driven loop: what a jump or a rate does to
the cores' readings and to the timers armed in core time.

The rules under test: a jump forward makes what became due fire at once; a jump back never
moves `now_ms` backwards (it holds, delaying every timer by the jump, as Kafka's Timer#update
does); a rate scales how fast core time passes; the wall clock follows the skew, backwards too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from harness.runtime.clock import ClockError, NodeClock


class _Handle:
    def __init__(self, when: float, callback: Callable[[], Any]) -> None:
        self.when = when
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class _Loop:
    """loop.time() and loop.call_at(), with time moved by the test."""

    def __init__(self) -> None:
        self.now_s = 1000.0
        self.handles: list[_Handle] = []

    def time(self) -> float:
        return self.now_s

    def call_at(self, when: float, callback: Callable[[], Any]) -> _Handle:
        handle = _Handle(when, callback)
        self.handles.append(handle)
        return handle

    def advance(self, seconds: float) -> None:
        """Let `seconds` pass, firing due handles in time order."""
        end = self.now_s + seconds
        while True:
            due = sorted((h for h in self.handles if not h.cancelled and h.when <= end),
                         key=lambda h: h.when)
            if not due:
                break
            handle = due[0]
            self.handles.remove(handle)
            self.now_s = max(self.now_s, handle.when)
            handle.callback()
        self.now_s = end


def _clock() -> tuple[_Loop, NodeClock, list[int]]:
    loop = _Loop()
    clock = NodeClock(loop, wall_s=lambda: 1_700_000_000.0 + loop.now_s)  # type: ignore[arg-type]
    return loop, clock, []


def test_in_step_the_clock_reads_the_loop_and_a_timer_fires_at_its_deadline() -> None:
    loop, clock, fired = _clock()
    start = clock.now_ms()
    assert start == 1_000_000
    clock.call_at(start + 500, lambda: fired.append(clock.now_ms()))
    loop.advance(0.499)
    assert fired == []
    loop.advance(0.001)
    assert fired == [start + 500]


def test_a_jump_forward_fires_what_became_due_at_once() -> None:
    loop, clock, fired = _clock()
    start = clock.now_ms()
    clock.call_at(start + 1000, lambda: fired.append(clock.now_ms()))  # e.g. a fetch timeout
    clock.jump(1500)
    assert clock.now_ms() == start + 1500
    loop.advance(0)
    assert fired == [start + 1500]  # at once, not 1000 ms of machine time later


def test_a_jump_back_holds_core_time_and_delays_every_timer_by_the_jump() -> None:
    loop, clock, fired = _clock()
    start = clock.now_ms()
    clock.call_at(start + 300, lambda: fired.append(clock.now_ms()))
    loop.advance(0.1)
    clock.jump(-2000)
    assert clock.now_ms() == start + 100  # held: never backwards
    loop.advance(1.0)
    assert clock.now_ms() == start + 100 and fired == []  # still held (skewed clock at -900)
    loop.advance(1.19)
    assert fired == []
    loop.advance(0.02)
    assert fired == [start + 300]  # 200 ms of core time + the 2000 ms jump later
    assert clock.skew_ms() == pytest.approx(-2000)


def test_the_wall_clock_follows_the_skew_backwards_too() -> None:
    _loop, clock, _ = _clock()
    before = clock.wall_now_ms()
    clock.jump(-5000)
    assert clock.wall_now_ms() == before - 5000
    clock.reset()
    assert clock.wall_now_ms() == before and clock.skew_ms() == 0


def test_a_fast_clock_fires_timers_early_in_machine_time() -> None:
    loop, clock, fired = _clock()
    clock.set_rate(2.0)
    start = clock.now_ms()
    clock.call_at(start + 1000, lambda: fired.append(clock.now_ms()))
    loop.advance(0.499)
    assert fired == []
    loop.advance(0.001)
    assert fired == [start + 1000]
    assert clock.to_json()["rate"] == 2.0


def test_a_rate_change_rearms_timers_already_armed() -> None:
    loop, clock, fired = _clock()
    start = clock.now_ms()
    clock.call_at(start + 1000, lambda: fired.append(clock.now_ms()))
    loop.advance(0.5)
    clock.set_rate(0.5)  # 500 ms of core time left, at half speed: 1 s of machine time
    loop.advance(0.999)
    assert fired == []
    loop.advance(0.001)
    assert fired == [start + 1000]


def test_a_cancelled_timer_never_fires_even_when_a_jump_rearms_the_others() -> None:
    loop, clock, fired = _clock()
    start = clock.now_ms()
    timer = clock.call_at(start + 100, lambda: fired.append(1))
    clock.call_at(start + 100, lambda: fired.append(2))
    timer.cancel()
    clock.jump(200)
    loop.advance(0)
    assert fired == [2]


@pytest.mark.parametrize("rate", [0.0, -1.0, float("inf"), float("nan"), 1000.0])
def test_a_rate_that_is_not_a_clock_speed_is_refused(rate: float) -> None:
    _loop, clock, _ = _clock()
    with pytest.raises(ClockError):
        clock.set_rate(rate)
    assert clock.rate == 1.0
