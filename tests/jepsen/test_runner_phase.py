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
