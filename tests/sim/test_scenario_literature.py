"""What the literature says, found by the data-plane simulation:
- acks=1: the simulator FINDS a lost acknowledged write (zombie leader);
- ISR, acks=all, min.insync.replicas=1: a leader cut off from its followers (ISR shrinks to the
  leader) that then loses leadership loses acknowledged writes when an unclean election is
  allowed; without it the partition goes offline instead; min.insync.replicas=2 loses nothing;
- quorum mode loses nothing there and stops acknowledging writes on the minority side, and
  loses nothing when the controller is cut off with a minority of the replicas (the fencing
  election; the sweep is tests/sim/test_quorum_mode_sweep.py);
- the last replica standing (KIP-966): min.insync.replicas=2 without ELR loses
  acknowledged writes when the last ISR member loses its unflushed tail; ELR prevents it.
"""

from __future__ import annotations

import pytest

from harness.sim.runs.runner import quiet_logging
from harness.sim.runs.scenario_run import FAULT_START_MS, ScenarioConfig, run_scenario


@pytest.fixture(autouse=True)
def _quiet_logging() -> None:
    quiet_logging()  # tests/conftest.py restores the previous configuration afterwards

SEEDS = (1, 2, 3, 4)


def _lost(**kw: object) -> list[int]:
    return [run_scenario(ScenarioConfig(seed=s, **kw)).lost_writes for s in SEEDS]  # type: ignore[arg-type]


def test_acks_1_zombie_leader_loses_acknowledged_writes() -> None:
    assert any(_lost(acks="1", min_insync_replicas=1, nemesis="zombie-leader"))
    assert not any(_lost(acks="all", min_insync_replicas=1, nemesis="zombie-leader"))


def test_min_isr_1_with_unclean_election_loses_writes_min_isr_2_does_not() -> None:
    common = dict(acks="all", nemesis="isolate-partition-leader", fault_duration_ms=5000)
    unclean = [run_scenario(ScenarioConfig(seed=s, min_insync_replicas=1, unclean_leader_election=True,
                                      **common)) for s in SEEDS]  # type: ignore[arg-type]
    assert any(r.lost_writes for r in unclean)
    assert all(r.unclean_elections >= 1 for r in unclean)
    assert not any(_lost(min_insync_replicas=1, **common))  # offline instead of lossy
    assert not any(_lost(min_insync_replicas=2, unclean_leader_election=True, **common))


def test_quorum_mode_loses_nothing_and_refuses_writes_on_the_minority_side() -> None:
    for seed in SEEDS:
        result = run_scenario(ScenarioConfig(seed=seed, replication_mode="quorum", acks="all",
                                        nemesis="leader-cut-from-followers-only",
                                        fault_duration_ms=5000))
        assert result.lost_writes == 0 and result.violations == {}
        # While cut from both followers, the leader (a minority of one) acknowledges nothing.
        acked_in_fault = [e for e in result.history.events
                          if e.f == "send" and e.type == "ok"
                          and FAULT_START_MS + 100 <= e.time // 1_000_000 < FAULT_START_MS + 5000]
        assert acked_in_fault == []


def test_elr_avoids_loss_when_the_last_replica_loses_its_tail() -> None:
    common = dict(acks="all", min_insync_replicas=2, nemesis="unclean-crash-losing-unflushed-tail",
                  fault_duration_ms=5000)
    assert all(_lost(eligible_leader_replicas=False, **common))
    assert not any(_lost(eligible_leader_replicas=True, **common))


def test_quorum_mode_loses_nothing_when_the_controller_is_cut_from_the_majority() -> None:
    # random-halves seed 3: {controller, broker 2} | {leader 1, broker 3}. Before the fencing
    # election the controller elected 2 (LEO 100) from heartbeat positions while 1 and 3, a
    # majority, kept committing up to offset 151: acknowledged writes were lost. Now it fences
    # (leader -1, a new epoch); 2's report alone is no majority, so nobody is elected until the
    # heal, when 1 and 3 report too and the one holding offset 151 leads.
    result = run_scenario(ScenarioConfig(seed=3, replication_mode="quorum", acks="all",
                                    nemesis="random-halves", fault_duration_ms=1000))
    assert result.lost_writes == 0
    assert result.anomalies() == {} and result.violations == {}
    assert result.leader_elections == 1
    # The majority side kept acknowledging writes during the fault (commit needs no controller).
    acked_in_fault = [e for e in result.history.events
                      if e.f == "send" and e.type == "ok"
                      and FAULT_START_MS + 100 <= e.time // 1_000_000 < FAULT_START_MS + 1000]
    assert len(acked_in_fault) > 20
