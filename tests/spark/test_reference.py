"""The reference scenarios' verdicts (harness/spark/reference.py) on hand-made groups: each
rule shown, not shown, and short of data."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

from harness.spark import reference as rf
from harness.spark.conclude import Evidence

EV = Evidence(min_runs=5, min_acked=100, min_attempted=100)


def group(nemesis: str, mode: str = "isr", acks: str = "all", min_isr: int = 2,
          runs: int = 8, acked: int = 1000, lost: int = 0, att: int = 500, ok: int = 450,
          **extra: Any) -> dict[str, Any]:
    row = dict(source="sim", replication_mode=mode, acks=acks, min_insync_replicas=min_isr,
               unclean_leader_election=False, eligible_leader_replicas=False,
               leader_epoch_enable=True, replication_factor=3, nemesis=nemesis,
               fault_duration_ms=5000, flush_policy="page-cache" if mode == "isr"
               else "fsync-before-ack", producer="kafka", replica_lag_time_max_ms=2000,
               broker_session_timeout_ms=1000, runs=runs, acked_writes=acked, lost_writes=lost,
               w_att_fault=att, w_ok_fault=ok, anomalous_runs=1 if lost else 0,
               divergent_runs=0, divergent_offsets=0, leader_elections_mean=1.0,
               probe_slots_during=4000, probe_ok_during=3900,
               visibility_lag_p99_ms=4000.0 if acks == "1" else 0.0,
               visibility_lag_max_ms=6000.0 if acks == "1" else 0.0,
               lost_per_million=lost * 1e6 / acked if acked else None)
    row.update(extra)
    return row


def one(rule, *rows: dict[str, Any]) -> rf.Finding:
    return rule(pd.DataFrame(list(rows)), EV)


def test_fast_leader_changes_both_ways():
    ok = one(rf.kip279, group("fast-leader-changes", leader_elections_mean=2.0))
    assert ok.status == rf.SHOWN and "2.0 leader elections per run" in ok.sentence
    diverged = one(rf.kip279, group("fast-leader-changes", leader_elections_mean=2.0,
                                    divergent_runs=1))
    assert diverged.status == rf.NOT_SHOWN and diverged.sentence.endswith(
        "1 runs ended divergent.")
    once = one(rf.kip279, group("fast-leader-changes", leader_elections_mean=1.0))
    assert once.status == rf.NOT_SHOWN and "fewer than two elections" in once.sentence
    assert one(rf.kip279, group("kill-leader")).status == rf.NO_DATA


def test_zombie_leader_both_ways():
    lossy_one = group("zombie-leader", acks="1", min_isr=1, lost=40)
    clean_all = group("zombie-leader")
    assert one(rf.zombie, lossy_one, clean_all).status == rf.SHOWN
    assert one(rf.zombie, group("zombie-leader", acks="1", min_isr=1), clean_all).status \
        == rf.NOT_SHOWN
    assert one(rf.zombie, lossy_one, group("zombie-leader", lost=3)).status == rf.NOT_SHOWN
    assert one(rf.zombie, lossy_one).status == rf.NO_DATA


def test_staggered_drop_separates_elr_from_unclean_both_ways():
    stag = "staggered-isr-drop-then-leader-crash"
    elr = group(stag, eligible_leader_replicas=True)
    dirty = group(stag, unclean_leader_election=True, lost=12)
    shown = one(rf.last_replica, elr, dirty)
    assert shown.status == rf.SHOWN and "with ELR lost 0.0" in shown.sentence
    assert one(rf.last_replica, group(stag, eligible_leader_replicas=True, lost=2),
               dirty).status == rf.NOT_SHOWN
    assert one(rf.last_replica, elr, group(stag, unclean_leader_election=True)).status \
        == rf.NOT_SHOWN


def test_unclean_election_trade_is_judged_in_probe_time_both_ways():
    """2.5 compares the probe's time served, not attempts: the attempt counts below say the
    opposite of the probe in every case, and never decide."""
    def cell(nem: str, unclean: bool, **kw: Any) -> dict[str, Any]:
        return group(nem, min_isr=1, unclean_leader_election=unclean, **kw)

    on = dict(lost=30, probe_ok_during=3600, ok=100)  # more time, fewer attempts served
    off = dict(lost=0, probe_ok_during=2000, ok=450)
    rows = [cell(n, u, **(on if u else off)) for n in ("kill-leader", "bridge")
            for u in (True, False)]
    shown = one(rf.unclean, *rows)
    assert shown.status == rf.SHOWN
    assert ("Over the 2 faults run with both settings, ISR (acks=all, min.insync.replicas=1) "
            "with unclean election lost 30000.0 acknowledged writes per million (60 of 2000, "
            "16 runs) and served 90.0% of the probe's 10 ms slots during the fault; without it "
            "lost 0.0") in shown.sentence
    # The same loss with less time served: not the trade.
    less = [cell(n, u, **(dict(on, probe_ok_during=1000) if u else off))
            for n in ("kill-leader", "bridge") for u in (True, False)]
    assert one(rf.unclean, *less).sentence.endswith(
        "it lost more without serving more of the time.")
    assert one(rf.unclean, *less).status == rf.NOT_SHOWN
    free = [cell("kill-leader", True, probe_ok_during=3600), cell("kill-leader", False)]
    assert one(rf.unclean, *free).status == rf.NOT_SHOWN
    # Only cells run with both settings are compared; a fault of one side alone is no data.
    assert one(rf.unclean, cell("kill-leader", True, **on),
               cell("bridge", False, **off)).status == rf.NO_DATA
    short = one(rf.unclean,
                cell("kill-leader", True, lost=30, probe_slots_during=50, probe_ok_during=40),
                cell("kill-leader", False, probe_slots_during=50, probe_ok_during=10))
    assert short.status == rf.NOT_SHOWN and "50 probe slots during the fault (needs 100)" \
        in short.sentence


def test_control_plane_dependency_both_ways():
    nem = "metadata-quorum-down-kill-follower"
    isr_stalls = group(nem, probe_ok_during=0)
    quorum_writes = group(nem, mode="quorum", probe_ok_during=4000)
    shown = one(rf.control_plane, isr_stalls, quorum_writes)
    assert shown.status == rf.SHOWN and "served 0.0% of the probe's slots" in shown.sentence
    assert one(rf.control_plane, group(nem, probe_ok_during=3000), quorum_writes).status \
        == rf.NOT_SHOWN
    assert one(rf.control_plane, isr_stalls).status == rf.NO_DATA


def test_controller_failover_and_strict_min_isr_both_ways():
    assert one(rf.controller_failover, group("isolate-controller-leader",
                                             probe_ok_during=4000)).status == rf.SHOWN
    assert one(rf.controller_failover, group("isolate-controller-leader",
                                             probe_ok_during=3000)).status == rf.NOT_SHOWN
    cut = "leader-cut-from-followers-only"
    assert one(rf.strict_min_isr, group(cut, acks="1", ok=495)).status == rf.SHOWN
    assert one(rf.strict_min_isr, group(cut, acks="1", ok=495, lost=5)).status == rf.NOT_SHOWN
    assert one(rf.strict_min_isr, group(cut, acks="1", ok=100)).status == rf.NOT_SHOWN
    assert one(rf.strict_min_isr, group(cut)).status == rf.NO_DATA


def test_strict_min_isr_needs_the_records_held_invisible_both_ways():
    cut = "leader-cut-from-followers-only"
    frozen = one(rf.strict_min_isr, group(cut, acks="1", ok=495), group(cut))
    assert frozen.status == rf.SHOWN
    assert "their p99 visibility lag was 4000 ms (median over groups), the longest 6000 ms." \
        in frozen.sentence
    # The evidence table: acks=1 beside acks=all, with the visibility lag columns.
    ev = frozen.evidence
    assert ev is not None and list(ev.columns) == list(rf.STRICT_EVIDENCE)
    assert ev[["acks", "lost_writes", "visibility_lag_p99_ms", "visibility_lag_max_ms"]] \
        .values.tolist() == [["1", 0, 4000.0, 6000.0], ["all", 0, 0.0, 0.0]]
    assert ev["time_availability_fault"].tolist() == [0.975, 0.975]
    # The HW advanced anyway (no strict min ISR): the records were visible within 300 ms.
    moving = one(rf.strict_min_isr, group(cut, acks="1", ok=495, visibility_lag_p99_ms=300.0,
                                          visibility_lag_max_ms=450.0))
    assert moving.status == rf.NOT_SHOWN and moving.sentence.endswith(
        "the HW did not freeze: the p99 visibility lag 300 ms is below 1000 ms.")
    # Runs that did not measure it cannot show it.
    unmeasured = one(rf.strict_min_isr, group(cut, acks="1", ok=495, visibility_lag_p99_ms=None,
                                              visibility_lag_max_ms=None))
    assert unmeasured.status == rf.NO_DATA and "no visibility lag" in unmeasured.sentence


def test_fenced_follower_both_ways_and_the_race_outside_the_matrix():
    assert one(rf.fenced, group("fenced-follower-rejoins")).status == rf.SHOWN
    assert one(rf.fenced, group("fenced-follower-rejoins", lost=1)).status == rf.NOT_SHOWN
    assert one(rf.stale_epoch, group("kill-leader")).status == rf.OUTSIDE


@pytest.mark.parametrize("rule", rf.RULES)
def test_every_rule_says_no_data_on_an_empty_input(rule):
    empty = pd.DataFrame([group("none")]).iloc[0:0]
    assert rule(empty, EV).status in (rf.NO_DATA, rf.OUTSIDE, rf.NOT_SHOWN)


def test_findings_cover_the_twelve_scenarios():
    refs = [f.ref for f in rf.findings(pd.DataFrame([group("none")]), EV)]
    assert refs == ["2.1-2.2", "2.3", "2.4", "2.5", "2.6", "2.7", "2.8", "2.9", "2.10",
                    "2.11", "2.12"]


def test_a_finding_s_evidence_table_is_in_report_html():
    from harness.spark.report_html import findings_section

    cut = "leader-cut-from-followers-only"
    frozen = one(rf.strict_min_isr, group(cut, acks="1", ok=495), group(cut))
    page = findings_section([frozen, one(rf.stale_epoch, group("kill-leader"))])
    assert page.count("<details>") == 1
    assert "Evidence of 2.12" in page and "<th>visibility_lag_p99_ms</th>" in page
    assert "<td>4000</td><td>6000</td>" in page
