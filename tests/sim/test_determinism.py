"""One seed reproduces one run exactly: the same trace digest (a hash of every event, in order)
and the same history, in this process, in another process with a different hash seed, and
through the `kraftlab sim quorum` command that failing seeds print for replay."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from harness.sim.runs.runner import quiet_logging
from harness.sim.runs.simulation import SimConfig, run_seed


@pytest.fixture(autouse=True)
def _quiet_logging() -> None:
    quiet_logging()  # tests/conftest.py restores the previous configuration afterwards


def test_same_seed_same_digest_and_history() -> None:
    first = run_seed(SimConfig(seed=11))
    second = run_seed(SimConfig(seed=11))
    assert first.digest == second.digest
    assert first.history == second.history
    assert first.events == second.events and first.sim_ms == second.sim_ms
    assert first.events > 300  # a real run, not an empty one
    other = run_seed(SimConfig(seed=12))
    assert other.digest != first.digest


def test_replay_command_reproduces_the_digest_in_a_fresh_process() -> None:
    config = SimConfig(seed=23, voters=5)
    expected = run_seed(config).digest
    command = config.replay_command().split()
    assert command[:3] == ["kraftlab", "sim", "quorum"]
    env = dict(os.environ, PYTHONHASHSEED="12345")  # set/dict order must not leak into the run
    out = subprocess.run(
        [sys.executable, "-m", "harness", *command[1:]],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert out.returncode in (0, 1), out.stderr
    match = re.search(r"digest ([0-9a-f]{32})", out.stdout)
    assert match is not None, out.stdout
    assert match.group(1) == expected


def test_determinism_self_test_flags_a_run_that_reads_the_wall_clock(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import time

    from harness.cli.main import main
    from harness.sim.runs.simulation import Simulation

    real_note = Simulation.note

    def leaky_note(self: Simulation, line: str) -> None:
        # A simulator bug: wall-clock time leaks into the trace.
        real_note(self, f"{line} {time.perf_counter_ns()}")

    monkeypatch.setattr(Simulation, "note", leaky_note)
    assert main(["sim", "quorum", "--seeds", "1", "--determinism", "--jobs", "1"]) == 1
    assert "NONDETERMINISM seed 1" in capsys.readouterr().out
    monkeypatch.undo()
    assert main(["sim", "quorum", "--seeds", "2", "--determinism", "--jobs", "1"]) == 0
