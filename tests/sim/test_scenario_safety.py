"""Data-plane safety, seeded simulation: with acks=all, min.insync.replicas=2, RF 3
and no unclean election, under partitions, process crashes and pauses, no acknowledged write is
lost, no two replicas disagree below the HW, and the leader's HW never passes the ISR's LEO.
(Power loss of the last in-sync replica is the KIP-966 case: tests/sim/test_scenario_literature.py.)
"""

from __future__ import annotations

import pytest

from harness.sim.runs.runner import quiet_logging
from harness.sim.runs.scenario_run import ScenarioConfig, run_scenario


@pytest.fixture(autouse=True)
def _quiet_logging() -> None:
    quiet_logging()  # tests/conftest.py restores the previous configuration afterwards

SAFE_NEMESES = (
    "isolate-partition-leader", "leader-cut-from-followers-only", "zombie-leader",
    "random-halves", "majorities-ring", "bridge", "isolate-controller-leader",
    "metadata-quorum-down", "kill-leader", "pause-leader", "kill-2-of-3", "flapping",
)
SEEDS = (1, 2, 3)


@pytest.mark.parametrize("nemesis", SAFE_NEMESES)
def test_acks_all_min_isr_2_loses_nothing(nemesis: str) -> None:
    acked_total = 0
    for seed in SEEDS:
        duration = 1000 if seed % 2 else 5000
        result = run_scenario(ScenarioConfig(seed=seed, acks="all", min_insync_replicas=2,
                                        nemesis=nemesis, fault_duration_ms=duration))
        counts = result.queue.counts
        assert result.drained, f"seed {seed}: no leader to drain after the heal"
        assert counts["lost-write"] == 0, (seed, result.queue.anomalies.get("lost-write"))
        assert counts["inconsistent-offsets"] == 0 and counts["duplicate"] == 0, seed
        assert counts["G1a"] == 0 and counts["precommitted-read"] == 0, seed
        assert result.violations == {}, (seed, result.violation_examples)
        acked_total += result.queue.stats["sends"]["ok"]
    # The workload really ran through the fault (not a vacuous pass).
    assert acked_total > 300


def test_no_fault_run_commits_everything_in_order() -> None:
    result = run_scenario(ScenarioConfig(seed=7, nemesis="none"))
    assert result.anomalies() == {}
    sends = result.queue.stats["sends"]
    assert sends["fail"] == 0 and sends["info"] == 0 and sends["ok"] > 200
    drain = [e for e in result.history.events if e.extra.get("final")][-1]
    offsets = [o for o, _ in drain.value["t-0"]]
    assert offsets == list(range(len(offsets))) and len(offsets) == sends["ok"]
