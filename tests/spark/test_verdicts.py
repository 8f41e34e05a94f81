"""The report's verdicts (harness/spark/verdicts.py) on hand-made paired tables: the headline
counts each way, the safety sentence for every loss outcome, mechanisms only where decisive, and
reproductions naming the first losing seed."""

from __future__ import annotations

from typing import Any

import pandas as pd

from harness.spark import verdicts as vd
from harness.spark.arms import COMPARISONS, EQUAL_SAFETY

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
    assert v.decisive[0][2].startswith("ISR cannot drop the dead follower")
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
    lines = vd.verdict_lines(verdicts)
    assert lines[0].startswith("- **quorum (majority of the replicas), acks=all vs ISR")
    assert lines[1].startswith("  - bridge (a-better): ISR waits for every in-sync follower")
    assert lines[2].startswith("- **quorum, acks=all, no fsync")


def test_mechanisms_follow_the_axis_and_the_losing_arm():
    elr = next(c for c in COMPARISONS if c.axis == "elr")
    assert vd.mechanism(elr, "isolate-partition-leader", "b-better").startswith(
        "the followers dropped while the ISR was below min.insync.replicas stay eligible")
    assert vd.mechanism(EQ, "isolate-partition-leader", "b-better").startswith(
        "ISR shrank to the leader before it was fenced")
    assert vd.mechanism(EQ, "power-loss-all-brokers", "a-lost").startswith(
        "on the page cache, a power loss of every replica")
    nofsync = next(c for c in COMPARISONS if c.b == "quorum-nofsync")
    assert vd.mechanism(nofsync, "power-loss-all-brokers", "b-lost").startswith(
        "without an fsync before counting")
    assert vd.mechanism(EQ, "kill-leader", "equivalent") == ""
    raft = next(c for c in COMPARISONS if (c.a, c.b) == ("isr-min2", "raft"))
    assert vd.mechanism(raft, "zombie-leader", "b-better").startswith(
        "a Raft partition elects its leader among its own replicas")
    assert vd.mechanism(raft, "bridge", "b-better").startswith(
        "ISR waits for every in-sync follower")
