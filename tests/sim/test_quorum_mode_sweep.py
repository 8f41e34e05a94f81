"""replication.mode=quorum, acks=all: a seeded sweep of the data-plane simulation over the fault
shapes that move leadership (random halves with the controller on either side, the leader
isolated, the leader killed). With the fencing election (partition/replica/quorum_mode.py,
quorum/controller/partition_change.py) no acknowledged write is ever lost and no two replicas
disagree below their HWs, whatever side the controller ends up on.

Each run is one deterministic seed; a failure names it (replay: `run_scenario(ScenarioConfig(...))`
with the config printed). About 10 s for the whole sweep.
"""

from __future__ import annotations

import pytest

from harness.sim.runs.runner import quiet_logging
from harness.sim.runs.scenario_run import ScenarioConfig, ScenarioResult, run_scenario


@pytest.fixture(autouse=True)
def _quiet_logging() -> None:
    quiet_logging()  # tests/conftest.py restores the previous configuration afterwards


NEMESES = ("random-halves", "isolate-partition-leader", "kill-leader")
SEEDS = range(1, 25)


def _run(nemesis: str, seed: int) -> ScenarioResult:
    return run_scenario(ScenarioConfig(seed=seed, replication_mode="quorum", acks="all",
                                  nemesis=nemesis, fault_duration_ms=1000 if seed % 2 else 5000))


@pytest.mark.parametrize("nemesis", NEMESES)
def test_quorum_mode_acks_all_loses_nothing_and_never_diverges(nemesis: str) -> None:
    failures: list[str] = []
    acked = elections = 0
    for seed in SEEDS:
        r = _run(nemesis, seed)
        divergent = r.divergent_offsets  # replica divergence at the end of the run
        if r.anomalies() or r.violations or divergent or not r.drained:
            failures.append(f"{r.config.key()}: anomalies {r.anomalies()}, violations "
                            f"{r.violations} {r.violation_examples[:2]}, divergent {divergent}, "
                            f"drained {r.drained}")
        acked += r.queue.stats["sends"]["ok"]
        elections += r.leader_elections
    assert not failures, "\n".join(failures)
    # Not vacuous: the workload ran through the faults and leadership really moved.
    assert acked > 200 * len(SEEDS)
    assert elections >= len(SEEDS) // 2
