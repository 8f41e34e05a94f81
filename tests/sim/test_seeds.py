"""Many seeded simulation runs of the real quorum (RaftCore + RaftLogStore on SimStorage +
MetadataImage) under partitions, crashes that lose unsynced data, restarts, pauses, drops,
duplicates and reordering: zero safety violations and every run converges. Any violation fails,
with the seeds and their replay commands (nothing is tolerated: a known open bug is pinned by a
strict-xfail test in tests/sim/test_found_bugs.py instead).

300 runs over 2 worker processes (one in five with 5 voters), a few simulated seconds each:
enough that every fault kind and every recovery path below is taken by a large share of them
(the coverage test asserts the shares). Longer sweeps are `kraftlab sim quorum --seeds N`.
A failure message lists every failing seed with the one command that replays it.
"""

from __future__ import annotations

from collections import Counter

import pytest

from harness.sim.runs.runner import RunSummary, run_many
from harness.sim.runs.simulation import SimConfig

RUNS = 300
JOBS = 2


def configs() -> list[SimConfig]:
    return [SimConfig(seed=s, voters=5 if s % 5 == 0 else 3) for s in range(1, RUNS + 1)]


@pytest.fixture(scope="module")
def summaries() -> list[RunSummary]:
    return list(run_many(configs(), jobs=JOBS))


def _report(failures: list[RunSummary]) -> str:
    return "\n".join(f"{f.violation}\n    replay: {f.replay_command}" for f in failures)


def test_runs_exercise_faults_elections_and_commits(summaries: list[RunSummary]) -> None:
    assert len(summaries) == RUNS
    faults: Counter[str] = Counter()
    for s in summaries:
        faults.update(dict(s.faults))
    # Every kind of fault happened many times; most runs saw a crash; many saw several epochs.
    assert min(faults[k] for k in ("crash", "restart", "partition", "heal", "pause")) > RUNS // 2
    assert sum(1 for s in summaries if dict(s.faults).get("crash", 0) > 0) > RUNS * 0.7
    assert sum(1 for s in summaries if s.epochs >= 3) > RUNS * 0.3
    assert sum(1 for s in summaries if s.committed >= 20 and s.client_ok >= 5) > RUNS * 0.8

    # The paths where Raft bugs live: divergence truncation, snapshot install, prefix deletion,
    # recovery after a crash.
    def runs_with(path: str) -> int:
        return sum(1 for s in summaries if dict(s.paths).get(path, 0) > 0)

    assert runs_with("truncate") > RUNS * 0.3
    assert runs_with("install_snapshot") > RUNS * 0.15
    assert runs_with("delete_prefix") > RUNS * 0.35
    assert runs_with("recover") > RUNS * 0.6


def _failures(summaries: list[RunSummary], liveness: bool) -> list[RunSummary]:
    return [s for s in summaries if not s.ok and (s.invariant == "Liveness") == liveness]


def test_no_safety_violation(summaries: list[RunSummary]) -> None:
    failures = _failures(summaries, liveness=False)
    assert not failures, f"{len(failures)} seeds broke safety:\n{_report(failures)}"


def test_every_run_converges_after_the_faults(summaries: list[RunSummary]) -> None:
    failures = _failures(summaries, liveness=True)
    assert not failures, f"{len(failures)} seeds did not converge:\n{_report(failures)}"
