"""Simulation against real processes (harness/study/sim_vs_real.py): the agreement rules on
hand-made rows, each way; one real cell end to end is slow (real processes)."""

from __future__ import annotations

import dataclasses

import pytest

from harness.study import sim_vs_real as svr
from tests.spark.fixture_runs import run, sec


def row(mode: str, nemesis: str, seed: int, *, ok: int, fail: int = 0, lost: int = 0,
        recovery: int | None = 100, elections: int = 1):
    r = run(f"{mode}-{nemesis}-{seed}-{ok}-{lost}", mode, "all", 2, nemesis, seed,
            [sec(2, ok, fail), sec(3, ok, fail)], acked_writes=100, lost_writes=lost,
            recovery_time_ms=recovery, leader_elections=elections)
    return r


def metrics(table, metric):
    return {(r["fault"], r["mode"]): (r["agree"], r["reason"]) for r in table
            if r["metric"] == metric}


def test_agreement_on_each_metric_both_ways():
    sim = [row("isr", "kill-leader", s, ok=9, fail=1) for s in (1, 2, 3)]
    sim += [row("isr", "power-loss-all-brokers", s, ok=5, fail=5, lost=4, recovery=2000,
                elections=2) for s in (1, 2, 3)]
    real = [("kill-partition-leader", row("isr", "kill-leader", s, ok=8, fail=2))
            for s in (1, 2, 3)]
    real += [("crash-unflushed", row("isr", "unclean-crash-losing-unflushed-tail", s, ok=10,
                                     recovery=300, elections=0)) for s in (1, 2, 3)]
    table = svr.compare(sim, real)
    kill, crash = ("kill-partition-leader (kill-leader)", "isr"), (
        "crash-unflushed (power-loss-all-brokers)", "isr")
    # kill: neither lost, availability 90% vs 80% (within 15 points), recovery and elections equal.
    assert {m: metrics(table, m)[kill][0] for m in ("loss", "availability", "recovery",
                                                    "elections")} == {
        "loss": "yes", "availability": "yes", "recovery": "yes", "elections": "yes"}
    # crash: the simulator lost, the real run did not; 50% vs 100%; 2000 vs 300 ms; 2 vs 0.
    said = {m: metrics(table, m)[crash] for m in ("loss", "availability", "recovery",
                                                  "elections")}
    assert all(agree == "no" for agree, _ in said.values())
    assert said["loss"][1] == svr.UNEXPLAINED
    assert said["availability"][1] == svr.EXPLAINED[("crash-unflushed", "availability")]
    shown = {r["metric"]: (r["sim"], r["real"]) for r in table if (r["fault"], r["mode"]) == crash}
    assert shown == {"loss": ("12 lost in 3 of 3 runs", "0 lost in 0 of 3 runs"),
                     "availability": ("50.0%", "100.0%"), "recovery": ("2000 ms", "300 ms"),
                     "elections": ("2", "0")}


def test_a_cell_without_simulated_runs_or_recovery_is_not_judged():
    real = [("kill-partition-leader", row("quorum", "kill-leader", 1, ok=5, recovery=None))]
    assert svr.compare([], real) == []
    sim = [row("quorum", "kill-leader", 1, ok=5, recovery=None)]
    recovery = metrics(svr.compare(sim, real), "recovery")
    assert recovery[("kill-partition-leader (kill-leader)", "quorum")] == ("-", "")


def test_markdown_counts_the_agreements():
    table = [{"fault": "f", "mode": "isr", "metric": "loss", "sim": "0", "real": "0",
              "agree": "yes", "reason": ""},
             {"fault": "f", "mode": "isr", "metric": "recovery", "sim": "-", "real": "1 ms",
              "agree": "-", "reason": ""}]
    text = svr.markdown(table, 3, "2026-01-01T00:00")
    assert "agree on 1 of 1 metric cells" in text and "| f | isr | loss | 0 | 0 | yes |  |" in text


@pytest.mark.slow
@pytest.mark.jepsen
def test_one_real_cell_against_the_simulator(tmp_path):
    table, path = svr.run_sim_vs_real(tmp_path, runs=1, faults=svr.FAULTS[:1], modes=("isr",),
                                      progress=lambda _: None)
    assert {r["metric"] for r in table} == {"loss", "availability", "recovery", "elections"}
    assert path.read_text().startswith("Simulation against real processes")
    assert (tmp_path / "sim-vs-real.csv").exists()
    assert dataclasses.is_dataclass(svr.side([]))
