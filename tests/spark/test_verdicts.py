"""The report's verdicts (harness/spark/verdicts.py) on hand-made paired tables: the headline
counts each way, the safety sentence for every loss outcome, mechanisms only where decisive and
read from the cell's runs (never a setting the arm does not have), and reproductions naming the
first losing seed."""

from __future__ import annotations

import re
from typing import Any

import pandas as pd
import pytest

from harness.spark import verdicts as vd
from harness.spark.arms import ARMS, COMPARISONS, EQUAL_SAFETY
from harness.spark.paired import cell_facts

EQ = next(c for c in COMPARISONS if (c.a, c.b) == ("isr-min2", "quorum"))
TRADE = next(c for c in COMPARISONS if c.kind != EQUAL_SAFETY)


def cell(comparison: str, nemesis: str, verdict: str, metric: str = "unavail_ms_during",
         **extra: Any) -> dict[str, Any]:
    return {**dict(comparison=comparison, source="sim", replication_factor=3, nemesis=nemesis,
                   fault_duration_ms=5000, producer="kafka", replica_lag_time_max_ms=2000,
                   broker_session_timeout_ms=1000, metric=metric, seeds=8, mean_a=100.0,
                   mean_b=50.0, diff=-50.0, diff_low=-80.0, diff_high=-20.0, verdict=verdict),
            **extra}


def loss(comparison: str, nemesis: str, a: int, b: int, runs: int = 8) -> dict[str, Any]:
    verdict = ("both-lost" if a and b else "a-lost" if a else "b-lost" if b else
               "neither-lost")
    return dict(comparison=comparison, source="sim", replication_factor=3, nemesis=nemesis,
                fault_duration_ms=5000, producer="kafka", replica_lag_time_max_ms=2000,
                broker_session_timeout_ms=1000, a_runs=runs, b_runs=runs, a_lossy_runs=a,
                b_lossy_runs=b, a_lossy_high=0.32 if not a else 0.9,
                b_lossy_high=0.32 if not b else 0.9, a_lost_writes=10 * a, b_lost_writes=10 * b,
                a_lossy_seeds=",".join(str(s) for s in range(3, 3 + a)),
                b_lossy_seeds=",".join(str(s) for s in range(5, 5 + b)),
                a_repro_run=f"run-a-{nemesis}" if a else None,
                b_repro_run=f"run-b-{nemesis}" if b else None,
                a_repro_command=f"kraftlab sim matrix --nemeses {nemesis}" if a else None,
                b_repro_command=None, verdict=verdict)


def test_headline_counts_the_faults_each_way_and_names_them():
    key = EQ.key
    table = pd.DataFrame([
        cell(key, "metadata-quorum-down-kill-follower", "b-better"),
        cell(key, "kill-2-of-3", "a-better"),
        cell(key, "kill-leader", "equivalent"),
        cell(key, "bridge", "inconclusive"),
        cell(key, "pause-leader", "insufficient"),
        cell(key, "kill-leader", "b-better", metric="avail_fault"),  # not the primary metric
        cell(key, "flapping", "a-better", replica_lag_time_max_ms=4000),  # a curve's cell
    ])
    safety = pd.DataFrame([loss(key, "kill-leader", 0, 0), loss(key, "kill-2-of-3", 0, 0)])
    (v,) = vd.comparison_verdicts(table, safety, [EQ])
    assert v.metric == "unavail_ms_during"
    assert v.headline == (
        "Equal safety (both acknowledge a write once 2 of the 3 replicas hold it): by "
        "unavailable time during the fault (open-loop probe), quorum (majority of the "
        "replicas), acks=all did better than ISR, acks=all, min.insync.replicas=2 under 1 of 5 "
        "faults (metadata-quorum-down-kill-follower), worse under 1 (kill-2-of-3), the same "
        "within 100 ms under 1, and the seeds could not tell under 2 (bridge, pause-leader).")
    assert [(n, verdict) for n, verdict, _ in v.decisive] == [
        ("metadata-quorum-down-kill-follower", "b-better"), ("kill-2-of-3", "a-better")]
    assert v.decisive[0][2] == ""  # no facts given: nothing is said
    assert v.safety == (
        "ISR, acks=all, min.insync.replicas=2 lost no acknowledged write under any fault; "
        "quorum (majority of the replicas), acks=all lost no acknowledged write under any "
        "fault; where neither lost any (2 faults), a loss rate above 32% per run is excluded "
        "at 95% (Wilson).")
    assert v.reproductions == []


def test_the_headline_turns_with_the_data():
    key = EQ.key
    flipped = pd.DataFrame([cell(key, "kill-2-of-3", "b-better"),
                            cell(key, "metadata-quorum-down-kill-follower", "a-better")])
    (v,) = vd.comparison_verdicts(flipped, pd.DataFrame(), [EQ])
    assert "did better than ISR, acks=all, min.insync.replicas=2 under 1 of 2 faults " \
           "(kill-2-of-3), worse under 1 (metadata-quorum-down-kill-follower)" in v.headline
    # Without the probe's column the attempt-based availability decides, with its margin.
    attempts = pd.DataFrame([cell(key, "kill-2-of-3", "equivalent", metric="avail_fault")])
    (v,) = vd.comparison_verdicts(attempts, pd.DataFrame(), [EQ])
    assert v.metric == "avail_fault" and "the same within 2 pp under 1" in v.headline


def test_safety_names_the_losing_arm_and_its_reproduction():
    key = TRADE.key
    safety = pd.DataFrame([loss(key, "zombie-leader", 2, 0), loss(key, "bridge", 0, 1),
                           loss(key, "kill-leader", 0, 0)])
    (v,) = vd.comparison_verdicts(pd.DataFrame(), safety, [TRADE])
    assert "lost acknowledged writes under zombie-leader (2 of 8 runs)" in v.safety
    assert "lost acknowledged writes under bridge (1 of 8 runs)" in v.safety
    assert v.safety.endswith("where neither lost any (1 faults), a loss rate above 32% per "
                             "run is excluded at 95% (Wilson).")
    repro = {(r.arm, r.nemesis, r.seed, r.run_id) for r in v.reproductions}
    assert repro == {(TRADE.a, "zombie-leader", 3, "run-a-zombie-leader"),
                     (TRADE.b, "bridge", 5, "run-b-bridge")}
    evidence = v.evidence.set_index("nemesis")
    assert evidence.loc["zombie-leader", "loss_verdict"] == "a-lost"
    assert evidence.loc["zombie-leader", "a_lossy_seeds"] == "3,4"


def test_equal_safety_verdicts_come_first_and_lines_carry_mechanisms():
    trade, eq = TRADE.key, EQ.key
    table = pd.DataFrame([cell(trade, "kill-leader", "equivalent"),
                          cell(eq, "bridge", "a-better")])
    verdicts = vd.comparison_verdicts(table, pd.DataFrame(), [TRADE, EQ])
    assert [v.comparison.kind for v in verdicts] == [EQUAL_SAFETY, TRADE.kind]
    facts = cell_facts(pd.DataFrame(pairs(eq, "bridge", a_unavail=200.0, b_unavail=1500.0)))
    verdicts = vd.comparison_verdicts(table, pd.DataFrame(), [TRADE, EQ], facts=facts)
    lines = vd.verdict_lines(verdicts)
    assert lines[0].startswith("- **quorum (majority of the replicas), acks=all vs ISR")
    assert lines[1].startswith("  - bridge (a-better): Over 4 paired seeds of a 5 s fault: ISR "
                               "(acks=all, min.insync.replicas=2, page-cache) was unavailable "
                               "200 ms")
    assert lines[2].startswith("- **quorum, acks=all, no fsync")


def pairs(comparison: str, nemesis: str, seeds: int = 4, a_unavail: float = 3000.0,
          b_unavail: float = 500.0, a_shrinks: int = 1, a_elections: int = 0,
          b_elections: int = 1, a_unclean: int = 0, a_lost: tuple[int, ...] = (),
          b_lost: tuple[int, ...] = (), recovery: tuple[float, float] = (900.0, 20.0),
          **cell_values: Any) -> list[dict[str, Any]]:
    """Paired runs (harness/spark/paired.py paired_runs' columns) of one cell, `seeds` seeds;
    `a_lost`/`b_lost`: writes lost per seed (shorter: the other seeds lost none)."""
    keys = dict(comparison=comparison, source="sim", replication_factor=3, nemesis=nemesis,
                fault_duration_ms=5000, producer="kafka", replica_lag_time_max_ms=2000,
                broker_session_timeout_ms=1000) | cell_values
    rows = []
    for seed in range(1, seeds + 1):
        rows.append(keys | {
            "seed": seed, "a_unavail_ms_during": a_unavail, "b_unavail_ms_during": b_unavail,
            "a_avail_fault": 0.1, "b_avail_fault": 0.9,
            "a_isr_shrinks": a_shrinks, "b_isr_shrinks": 0,
            "a_leader_elections": a_elections, "b_leader_elections": b_elections,
            "a_unclean_elections": a_unclean, "b_unclean_elections": 0,
            "a_lost_writes": a_lost[seed - 1] if seed <= len(a_lost) else 0,
            "b_lost_writes": b_lost[seed - 1] if seed <= len(b_lost) else 0,
            "a_recovery_ms": recovery[0], "b_recovery_ms": recovery[1]})
    return rows


def verdict_with(comparison, nemesis: str, verdict: str, **runs: Any) -> vd.Verdict:
    table = pd.DataFrame([cell(comparison.key, nemesis, verdict)])
    facts = cell_facts(pd.DataFrame(pairs(comparison.key, nemesis, **runs)))
    (v,) = vd.comparison_verdicts(table, pd.DataFrame(), [comparison], facts=facts)
    return v


def test_the_mechanism_is_read_from_the_cells_runs():
    v = verdict_with(EQ, "isolate-partition-leader", "b-better")
    (why,) = [w for _, _, w in v.decisive]
    assert why.startswith("Over 4 paired seeds of a 5 s fault: ISR (acks=all, "
                          "min.insync.replicas=2, page-cache) was unavailable 3,000 ms of the "
                          "fault on average, shrank its ISR in 4 of 4 runs, elected a new "
                          "leader in 0 of 4 runs, lost no acknowledged write and acknowledged "
                          "again 900 ms after the heal (median); quorum (acks=all, "
                          "fsync-before-ack) was unavailable 500 ms")
    assert "elected a new leader in 4 of 4 runs" in why.split("; ")[1]


def test_other_runs_give_another_sentence():
    first = verdict_with(EQ, "kill-leader", "b-better").decisive[0][2]
    second = verdict_with(EQ, "kill-leader", "b-better", seeds=6, a_unavail=1200.0,
                          a_shrinks=0, a_elections=1, a_unclean=1, a_lost=(3, 0, 2),
                          recovery=(40.0, 15.0)).decisive[0][2]
    assert first != second
    a_side = second.split("; ")[0]
    assert a_side.startswith("Over 6 paired seeds of a 5 s fault: ISR")
    assert "was unavailable 1,200 ms" in a_side and "shrank its ISR in 0 of 6 runs" in a_side
    assert "elected a new leader in 6 of 6 runs (6 of 6 elections unclean)" in a_side
    assert "lost 5 acknowledged writes in 2 of 6 runs" in a_side
    assert "acknowledged again 40 ms after the heal" in a_side


def test_without_the_probe_it_says_the_attempts_and_a_loss_cell_says_the_loss():
    v = verdict_with(EQ, "power-loss-all-brokers", "b-better", a_lost=(7, 8))
    attempts = pd.DataFrame([cell(EQ.key, "power-loss-all-brokers", "b-better",
                                  metric="avail_fault")])
    facts = cell_facts(pd.DataFrame(pairs(EQ.key, "power-loss-all-brokers", a_lost=(7, 8))))
    (w,) = vd.comparison_verdicts(attempts, pd.DataFrame(), [EQ], facts=facts)
    assert "acknowledged 10% of the writes attempted during the fault" in w.decisive[0][2]
    assert "lost 15 acknowledged writes in 2 of 4 runs" in v.decisive[0][2]
    safety = pd.DataFrame([loss(EQ.key, "power-loss-all-brokers", 2, 0, runs=4)])
    (s,) = vd.comparison_verdicts(pd.DataFrame(), safety, [EQ], facts=facts)
    assert [(n, verdict) for n, verdict, _ in s.decisive] == [("power-loss-all-brokers",
                                                               "a-lost")]
    assert "lost 15 acknowledged writes in 2 of 4 runs" in s.decisive[0][2]


@pytest.mark.parametrize("comparison", COMPARISONS, ids=lambda c: c.key)
def test_the_mechanism_cites_only_the_arms_own_settings(comparison):
    why = verdict_with(comparison, "kill-2-of-3", "a-better").decisive[0][2]
    for side, key in zip(why.split("; "), (comparison.a, comparison.b), strict=True):
        arm = ARMS[key]
        cited = re.findall(r"min\.insync\.replicas=(\d+)", side)
        if arm.settings.get("replication_mode") == "isr":
            assert cited == [str(arm.settings["min_insync_replicas"])], side
        else:
            assert cited == [], side
        assert f"acks={arm.settings['acks']}" in side
        assert ("ELR" in side) == bool(arm.settings.get("eligible_leader_replicas")), side
        assert ("unclean election" in side) == bool(
            arm.settings.get("unclean_leader_election")), side
        policy = [p for p in arm.flush_policies if p is not None][0]
        assert policy in side and not any(
            p in side for p in ("page-cache", "flush-every-message", "fsync-before-ack",
                                "no-fsync") if p != policy), side
        assert ("shrank its ISR" in side) == (arm.settings["replication_mode"] == "isr")


def test_no_facts_for_the_cell_means_no_sentence():
    other = cell_facts(pd.DataFrame(pairs(EQ.key, "bridge")))
    table = pd.DataFrame([cell(EQ.key, "kill-leader", "b-better")])
    (v,) = vd.comparison_verdicts(table, pd.DataFrame(), [EQ], facts=other)
    assert v.decisive == [("kill-leader", "b-better", "")]
    assert vd.mechanism(EQ, None) == ""
