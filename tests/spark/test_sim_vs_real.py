"""Simulation against real processes (harness/study/sim_vs_real.py): the agreement rules on
hand-made rows, each way; one real cell end to end is slow (real processes)."""

from __future__ import annotations

import dataclasses

import pytest

from harness.results.schema import Window
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
    real += [("crash-unflushed", row("isr", "power-loss-all-brokers", s, ok=10,
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
    assert said["recovery"][1] == svr._RESTART  # every replica killed: the restart's start-up
    shown = {r["metric"]: (r["sim"], r["real"]) for r in table if (r["fault"], r["mode"]) == crash}
    assert shown == {"loss": ("12 lost in 3 of 3 runs", "0 lost in 0 of 3 runs"),
                     "availability": ("50.0%", "100.0%"), "available time": ("100.0%", "100.0%"),
                     "recovery": ("2000 ms", "300 ms"),
                     "elections": ("2", "0")}


def test_each_real_fault_is_compared_with_the_shape_its_row_is_named_after():
    """Like with like: the simulated shape of each real fault is the matrix name the real run's
    row carries, and every mode, raft included, runs on both sides."""
    from harness.jepsen.summary_row import matrix_nemesis
    from harness.sim.faults.shapes import SCENARIO_NEMESES

    assert len(svr.FAULTS) >= 6 and svr.MODES == ("isr", "quorum", "raft")
    for real, shape in svr.FAULTS:
        assert matrix_nemesis((real,), "queue") == shape
        assert shape in SCENARIO_NEMESES
    assert dict(svr.FAULTS)["crash-unflushed"] == "power-loss-all-brokers"


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


def test_available_time_is_judged_from_the_gaps_both_ways_and_explains_attempt_ratios():
    """Seconds 2 and 3 are the fault ([2000, 4000) ms): a gap over all of it is 0% available
    time, a gap over 1.6 s of it 20%. The attempt ratios (90% vs 10%) disagree; where the
    available time agrees, that is the reason given."""
    sim = [row("isr", "leader-cut-from-followers-only", s, ok=9, fail=1) for s in (1, 2)]
    sim = [dataclasses.replace(r, unavailability_windows=(Window(1900, 4300),)) for r in sim]
    real = [("leader-cut-from-followers-only",
             dataclasses.replace(row("isr", "leader-cut-from-followers-only", s, ok=1, fail=9),
                                 unavailability_windows=(Window(2400, 4100),)))
            for s in (1, 2)]
    cell = ("leader-cut-from-followers-only", "isr")
    table = svr.compare(sim, real)
    shown = {r["metric"]: (r["sim"], r["real"]) for r in table}
    assert shown["available time"] == ("0.0%", "20.0%")
    assert metrics(table, "available time")[cell] == ("no", svr.UNEXPLAINED)
    assert metrics(table, "availability")[cell] == ("no", svr.UNEXPLAINED)
    close = [(n, dataclasses.replace(r, unavailability_windows=(Window(2100, 4100),)))
             for n, r in real]
    table = svr.compare(sim, close)
    assert metrics(table, "available time")[cell] == ("yes", "")
    assert metrics(table, "availability")[cell] == ("no", svr._ATTEMPTS)


def test_a_real_row_is_retimed_to_its_fault_s_own_heal():
    """The real row's heal_ms is the run's final clean-up heal (12 s); the fault itself was
    healed at 6 s: the comparison measures from 6 s, recovery to the first acknowledged write
    completing after it (6.9 s), as the simulator does."""
    from harness.check.history import Event, pair_operations

    ms = 1_000_000
    ops = pair_operations([
        Event(0, 6500 * ms, 1, "invoke", "send", ["t-0", 1]),
        Event(1, 6900 * ms, 1, "ok", "send", ["t-0", [0, 1]]),
        Event(2, 5000 * ms, 2, "invoke", "send", ["t-0", 2]),
        Event(3, 5900 * ms, 2, "ok", "send", ["t-0", [1, 2]]),  # before the heal
        Event(4, 12100 * ms, 3, "invoke", "send", ["t-0", 3], extra={"final": True}),
        Event(5, 12110 * ms, 3, "ok", "send", ["t-0", [2, 3]], extra={"final": True}),
    ])
    base = dataclasses.replace(row("isr", "kill-leader", 1, ok=5), fault_start_ms=1000,
                               fault_end_ms=6000, heal_ms=12000, recovery_time_ms=20)
    moved = svr.retimed(base, ops)
    assert (moved.heal_ms, moved.recovery_time_ms) == (6000, 900)
    # A fault held until the final heal keeps the row's own (probe) recovery.
    held = dataclasses.replace(base, fault_end_ms=12000)
    assert svr.retimed(held, ops) == held
    # No acknowledged write after the heal within the workload: not recovered.
    assert svr.retimed(base, ops[1:]).recovery_time_ms is None
