"""The hung-leader probe (harness/net/liveness.py): the window's rule with explicit times, then two
probes on loopback UDP: one that stops answering (as a stopped process does) is reported, one
that answers is never reported, and the nemesis link filter silences a peer like a cut link.
Waits are on events with generous bounds, never on elapsed time."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from harness.net.liveness import LivenessProbe, PingWindow

HOST = "127.0.0.1"


def test_window_suspects_only_a_ping_unanswered_for_the_timeout() -> None:
    w = PingWindow(timeout_ms=300)
    assert not w.is_suspect(1_000)  # nothing sent yet
    w.sent(1_000)
    w.sent(1_050)  # the oldest unanswered ping is what counts
    assert not w.is_suspect(1_299)
    assert w.is_suspect(1_300)
    w.answered()  # any answer proves the process ran after the oldest ping
    assert not w.is_suspect(5_000)
    w.sent(5_000)
    w.resume()  # we were stopped ourselves: start over, blame nobody
    assert not w.is_suspect(9_000)


def test_the_timeout_grows_with_the_slowest_recent_answer() -> None:
    w = PingWindow(timeout_ms=150)
    for _ in range(10):
        w.answered(rtt_ms=2)
    assert w.timeout() == 150  # an idle machine keeps the configured timeout
    w.answered(rtt_ms=60)  # a loaded machine answered slowly once
    assert w.timeout() == 240
    w.sent(1_000)
    assert not w.is_suspect(1_200) and w.is_suspect(1_240)
    for _ in range(300):  # the slow answer left the window
        w.answered(rtt_ms=1)
    assert w.timeout() == 150
    w.answered(rtt_ms=10_000)
    assert w.timeout() == 2_000  # capped


async def _pair(timeout_ms: int, dropped: set[int] | None = None) -> tuple[
        LivenessProbe, LivenessProbe, asyncio.Queue[int]]:  # fmt: skip
    loop = asyncio.get_running_loop()
    reports: asyncio.Queue[int] = asyncio.Queue()
    drop = dropped if dropped is not None else set()
    follower = LivenessProbe(node_id=1, host=HOST, port=0, interval_ms=10, timeout_ms=timeout_ms,
                             loop=loop, on_unresponsive=reports.put_nowait,
                             is_dropped=lambda peer: peer in drop)  # fmt: skip
    leader = LivenessProbe(node_id=2, host=HOST, port=0, interval_ms=10, timeout_ms=timeout_ms,
                           loop=loop, on_unresponsive=reports.put_nowait)  # fmt: skip
    follower.start()
    leader.start()
    follower.watch(2, leader.address)
    return follower, leader, reports


async def _until(predicate: Callable[[], bool], bound_s: float = 20.0) -> None:
    """Poll a counter the probe's thread updates (no event to await across the thread)."""
    async def wait() -> None:
        while not predicate():  # noqa: ASYNC110 - the counters change on another thread
            await asyncio.sleep(0.005)  # poll interval

    await asyncio.wait_for(wait(), bound_s)


def test_a_peer_that_answers_is_never_reported() -> None:
    async def main() -> None:
        follower, leader, reports = await _pair(timeout_ms=2_000)
        try:
            await _until(lambda: follower.pongs_received >= 30)
            assert reports.empty() and follower.reports == 0
        finally:
            follower.stop()
            leader.stop()

    asyncio.run(main())


def test_a_peer_that_stops_answering_is_reported_and_a_new_watch_starts_clean() -> None:
    async def main() -> None:
        follower, leader, reports = await _pair(timeout_ms=100)
        try:
            await _until(lambda: follower.pongs_received >= 3)
            leader.answering = False  # the process is stopped: its thread answers nothing
            assert await asyncio.wait_for(reports.get(), 20) == 2
            follower.watch(None)  # e.g. it started a pre-vote: nobody to watch meanwhile
            leader.answering = True
            follower.watch(2, leader.address)
            before = follower.reports
            await _until(lambda: follower.pongs_received >= 10)
            assert follower.reports == before
        finally:
            follower.stop()
            leader.stop()

    asyncio.run(main())


def test_the_link_filter_silences_the_peer_like_a_cut_link() -> None:
    async def main() -> None:
        dropped: set[int] = set()
        follower, leader, reports = await _pair(timeout_ms=100, dropped=dropped)
        try:
            await _until(lambda: follower.pongs_received >= 3)
            dropped.add(2)
            assert await asyncio.wait_for(reports.get(), 20) == 2
        finally:
            follower.stop()
            leader.stop()

    asyncio.run(main())
