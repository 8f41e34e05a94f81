"""The runner's fault phase (`_run_async`) on a laid-out cluster that runs nothing.

A worker that raises before `RunOptions.stop_when` fires must be in `crashed_tasks`: the early
stop ends the phase without awaiting the tasks' gather, and their results are collected when
they are cancelled (a task the runner cancelled itself is not a crash). No process is started:
the nodes' ports refuse connections, and `heal_all` is stubbed (it would start the nodes).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from harness.jepsen.nemesis import ClusterNemesis
from harness.jepsen.recorder import Recorder, RunContext
from harness.jepsen.run_core import STOP_POLL_S, _nemesis_after
from harness.jepsen.runner import RunOptions, _run_async
from harness.launcher import cluster as cl


class CrashingWorkload:
    """Worker 0 raises at once; worker 1 runs until it is cancelled (or the deadline)."""

    name = "crashing"
    concurrency = 2
    op_timeout_s = 1.0

    def __init__(self) -> None:
        self.crashed = asyncio.Event()
        self.cancelled: list[int] = []

    def describe(self) -> dict[str, Any]:
        return {}

    async def setup(self, ctx: RunContext) -> None:
        return None

    async def run_worker(self, ctx: RunContext, worker: int, deadline: float) -> None:
        if worker == 0:
            self.crashed.set()
            raise ValueError("worker bug")
        try:
            await asyncio.sleep(max(0.0, deadline - time.monotonic()))  # the phase's own bound
        except asyncio.CancelledError:
            self.cancelled.append(worker)
            raise

    async def final(self, ctx: RunContext, deadline: float) -> dict[str, Any]:
        return {"final": "done"}


def test_a_worker_crash_before_an_early_stop_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cl.create_cluster(tmp_path, 3, {})

    async def no_heal(self: ClusterNemesis) -> dict[str, Any]:
        return {}

    monkeypatch.setattr(ClusterNemesis, "heal_all", no_heal)
    workload = CrashingWorkload()

    async def after_the_crash(nemesis: ClusterNemesis) -> bool:
        return workload.crashed.is_set()

    options = RunOptions(out_dir=tmp_path / "out", nemesis="none", time_limit_s=60.0,
                         stop_when=after_the_crash, recovery_timeout_s=0.2)

    async def go() -> dict[str, Any]:
        return await _run_async(options, tmp_path, workload, Recorder())

    started = time.monotonic()
    results = asyncio.run(go())
    assert time.monotonic() - started < 30.0  # the stop, not the 60 s limit, ended the phase
    assert results["stopped_early_s"] is not None
    assert results["crashed_tasks"] == ["worker 0: ValueError('worker bug')"]
    assert workload.cancelled == [1]  # cancelled by the stop, and not reported as a crash
    assert results["final"] == "done"


class CountingNemesis:
    """Notes how many events the history held when its schedule began."""

    def __init__(self, rec: Recorder) -> None:
        self.rec = rec
        self.started_with: list[int] = []

    async def run(self, deadline: float) -> None:
        self.started_with.append(len(self.rec.events))


def test_start_when_holds_the_first_fault_until_the_workload_has_served() -> None:
    rec = Recorder()
    nemesis = CountingNemesis(rec)

    async def two_acks(r: Recorder) -> bool:
        return sum(e.type == "ok" for e in r.events) >= 2

    async def go() -> None:
        deadline = time.monotonic() + 60.0
        task = asyncio.create_task(_nemesis_after(two_acks, rec, nemesis, deadline))
        for value in range(3):
            await asyncio.sleep(STOP_POLL_S)  # the condition is asked in between
            assert not nemesis.started_with
            rec.record(0, "invoke", "send", value)
            rec.record(0, "ok", "send", value)
            if value == 0:
                continue
            await asyncio.wait_for(task, 30.0)
            break

    asyncio.run(go())
    assert nemesis.started_with == [4]  # the second ok, and nothing before it


def test_a_start_condition_that_never_holds_leaves_the_run_unfaulted() -> None:
    rec = Recorder()
    nemesis = CountingNemesis(rec)

    async def never(r: Recorder) -> bool:
        return False

    asyncio.run(_nemesis_after(never, rec, nemesis, time.monotonic() + 0.3))
    assert nemesis.started_with == []
