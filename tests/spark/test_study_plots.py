"""The study's plots and report.html from hand-made tables (no Spark): every plot renders, with
data and without, and the page puts the rules before the numbers."""

from __future__ import annotations

from typing import Any

import pandas as pd

from harness.spark import report_html as rh
from harness.spark import study_plots as sp
from harness.spark import verdicts as vd
from harness.spark.arms import COMPARISONS
from harness.spark.reference import Finding
from harness.spark.repro import Replayed
from tests.spark.test_verdicts import EQ, cell, loss

PNG = b"\x89PNG\r\n\x1a\n"


def group(mode: str, nemesis: str, **extra: Any) -> dict[str, Any]:
    row = dict(source="sim", replication_mode=mode, acks="all", min_insync_replicas=2,
               unclean_leader_election=False, eligible_leader_replicas=False,
               leader_epoch_enable=True, replication_factor=3, nemesis=nemesis,
               fault_duration_ms=5000, flush_policy="page-cache" if mode == "isr" else
               "fsync-before-ack", producer="kafka", replica_lag_time_max_ms=2000,
               broker_session_timeout_ms=1000, runs=5, lossy_runs=0, probe_slots_during=2500,
               probe_ok_during=2000, latency_p50_ms_before=9.0, latency_p99_ms_before=14.0,
               latency_p999_ms_before=20.0, latency_p50_ms_during=30.0,
               latency_p99_ms_during=900.0, latency_p999_ms_during=1500.0,
               latency_p50_ms_after=10.0, latency_p99_ms_after=40.0,
               latency_p999_ms_after=60.0)
    row.update(extra)
    return row


def groups() -> pd.DataFrame:
    rows = []
    for mode in ("isr", "quorum"):
        for lag in (1000, 2000, 4000):
            rows.append(group(mode, "follower-gc-pauses", replica_lag_time_max_ms=lag,
                              probe_ok_during=2500 - lag // 10, lossy_runs=lag // 2000))
        for rf, min_isr in ((3, 2), (5, 2), (5, 3)):
            rows.append(group(mode, "kill-2-of-3", replication_factor=rf,
                              min_insync_replicas=min_isr))
    return pd.DataFrame(rows)


def test_every_study_plot_renders_with_and_without_data(tmp_path):
    paths = sp.write_study_plots(tmp_path, groups(), groups())
    assert [p.name for p in paths] == [c[0] for c in sp.CURVES] + [sp.LATENCY_PLOT]
    assert all(p.read_bytes()[:8] == PNG for p in paths)
    empty = groups().iloc[0:0]
    (tmp_path / "empty").mkdir()
    assert all(p.read_bytes()[:8] == PNG for p in
               sp.write_study_plots(tmp_path / "empty", empty, empty))


def test_curve_rows_hold_the_other_settings_at_their_defaults():
    rows = sp._curve_rows(groups(), "replica_lag_time_max_ms", ("follower-gc-pauses",))
    assert sorted(set(zip(rows["arm"], rows["replica_lag_time_max_ms"], strict=True))) == [
        ("isr-min2", 1000), ("isr-min2", 2000), ("isr-min2", 4000),
        ("quorum", 1000), ("quorum", 2000), ("quorum", 4000)]
    rf = sp._curve_rows(groups(), "rf_min_isr", ("kill-2-of-3",))
    assert set(rf["arm"]) == {"isr min ISR 2", "isr min ISR 3", "quorum"}


def test_report_html_states_the_rules_before_any_number(tmp_path):
    table = pd.DataFrame([cell(EQ.key, "kill-2-of-3", "a-better"),
                          cell(EQ.key, "kill-leader", "equivalent")])
    safety = pd.DataFrame([loss(EQ.key, "kill-2-of-3", 1, 0)])
    verdicts = vd.comparison_verdicts(table, safety, COMPARISONS)
    forest = sp.forest(tmp_path / "f.png", verdicts[0].evidence, verdicts[0].metric, "a", "b")
    assert forest.read_bytes()[:8] == PNG
    timeline = Replayed("run-a-kill-2-of-3", "kraftlab sim matrix --nemeses kill-2-of-3", 4,
                        "- lost acknowledged writes (4): offset 7\n\n| ms | broker 1 |\n|---|---|"
                        "\n| 3000 | 1/0 (leads), [1,2,3], 9/8 |", 1)
    page = rh.write_html(tmp_path, rh.HtmlInput(
        meta={"runs": 16, "sources": "sim: 16", "input": "`runs`", "master": "local[2]"},
        verdicts=verdicts, findings=[Finding("2.4", "zombie", "shown", "acks=1 lost 3")],
        sentences={"sim": ["Reproduced: a claim."]}, configs=groups(),
        forest_plots={EQ.key: "f.png"}, timelines={"run-a-kill-2-of-3": timeline})).read_text()
    rules = page.index("How to read this report")
    assert rules < page.index("Verdicts at equal safety") < page.index("kill-2-of-3")
    assert "margin (no difference within)" in page[rules:page.index("Verdicts at equal")]
    assert "seed 3, 10 acknowledged writes lost" in page
    assert "<code>kraftlab sim matrix --nemeses kill-2-of-3</code>" in page
    assert "<td>1/0 (leads), [1,2,3], 9/8</td>" in page
    assert "Cost without a fault: acknowledged-write latency p50/p99 9/14 ms" in page
    assert '<td class="shown">shown</td>' in page


def test_the_election_timeout_curve_draws_raft_runs_that_set_it():
    rows = [group("raft", "flapping", election_timeout_ms=ms, probe_ok_during=ok)
            for ms, ok in ((50, 100), (250, 1500), (1000, 900))]
    rows += [group("raft", "flapping", election_timeout_ms=None),  # the arm's own (drawn)
             group("quorum", "flapping", election_timeout_ms=None)]
    g = pd.DataFrame(rows)
    curve = sp._curve_rows(g, "election_timeout_ms", ("flapping",))
    assert list(zip(curve["arm"], curve["election_timeout_ms"], strict=True)) == [
        ("raft", 50), ("raft", 250), ("raft", 1000)]
    # The other curves leave runs with a set election timeout out.
    lag = sp._curve_rows(g, "replica_lag_time_max_ms", ("flapping",))
    assert sorted(lag["arm"]) == ["quorum", "raft"] and lag["election_timeout_ms"].isna().all()
