"""The conclusion's rules on hand-made aggregate tables (pandas only, no Spark).

The first five cases are probes (data that does not show the claim); each once
said "Reproduced". Every rule must now compare only cells run on both sides, leave out nemesis
`none` where a fault is the point, and refuse a verdict on too little data.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

from harness.spark import conclude as c
from tests.spark.fixture_runs import FIXTURE_EVIDENCE

EVIDENCE = (c.DEFAULT_EVIDENCE, FIXTURE_EVIDENCE)


def row(mode: str, acks: str, min_isr: int, unclean: bool, elr: bool, rf: int, nem: str,
        runs: int, acked: int, lost: int, att: int, ok: int, epochs: bool = True,
        dur: int = 1000, divergent: int = 0) -> dict[str, Any]:
    return dict(source="sim", replication_mode=mode, acks=acks, min_insync_replicas=min_isr,
                unclean_leader_election=unclean, eligible_leader_replicas=elr,
                replication_factor=rf, leader_epoch_enable=epochs, nemesis=nem,
                fault_duration_ms=0 if nem == "none" else dur, runs=runs, acked_writes=acked,
                lost_writes=lost, w_att_fault=att, w_ok_fault=ok, anomalous_runs=0,
                divergent_runs=divergent, divergent_offsets=3 * divergent,
                lost_per_million=lost * 1e6 / acked if acked else None)


def frame(*rows: dict[str, Any]) -> pd.DataFrame:
    return pd.DataFrame(list(rows))


def last(said: list[str]) -> str:
    verdicts = [s for s in said if s.startswith(("Reproduced: ", "Not reproduced: "))]
    assert len(verdicts) == 1, said
    return verdicts[0]


@pytest.mark.parametrize("ev", EVIDENCE)
def test_quorum_rows_only_without_a_fault_prove_nothing(ev):
    g = frame(row("quorum", "all", 2, False, False, 3, "none", 1, 10, 0, 0, 0),
              row("isr", "all", 1, False, False, 3, "kill-leader", 20, 10000, 50, 100, 90))
    assert last(c.rule_quorum_loss(g, ev)) == (
        "Not reproduced: quorum mode with acks=all loses no acknowledged write (insufficient "
        "data: quorum mode was run only without a fault).")


@pytest.mark.parametrize("ev", EVIDENCE)
def test_unclean_on_and_off_under_different_nemeses_are_not_compared(ev):
    g = frame(row("isr", "all", 1, True, False, 3, "pause-leader", 20, 10000, 10, 1000, 900),
              row("isr", "all", 1, False, False, 3, "metadata-quorum-down", 20, 10000, 0, 1000,
                  100))
    said = c.rule_unclean(g, ev)
    assert said[-1] == (
        "Not reproduced: unclean election trades loss for availability (insufficient data: no "
        "cell (same other settings, replication factor, nemesis and fault duration) was run "
        "with both unclean election on and off).")


@pytest.mark.parametrize("ev", EVIDENCE)
def test_fewer_live_never_pools_different_replication_factors(ev):
    g = frame(row("isr", "all", 1, False, False, 3, "kill-2-of-3", 20, 10000, 0, 1000, 600),
              row("quorum", "all", 2, False, False, 5, "kill-2-of-3", 20, 10000, 0, 1000, 590))
    said = c.rule_fewer_live(g, ev)
    assert said[-1].startswith("Not reproduced: ISR mode stays writable with fewer live "
                               "replicas than quorum mode needs (insufficient data: no cell ")
    # The same data at equal RF 3 does compare (and ISR is higher there).
    g.loc[1, "replication_factor"] = 3
    assert c.rule_fewer_live(g, ev)[-1] == (
        "Reproduced: ISR mode stays writable with fewer live replicas than quorum mode needs.")


@pytest.mark.parametrize("ev", EVIDENCE)
def test_min_isr_with_a_handful_of_writes_is_insufficient(ev):
    g = frame(row("isr", "all", 1, True, False, 3, "isolate-partition-leader", 20, 10000, 5,
                  100, 50),
              row("isr", "all", 2, True, False, 3, "isolate-partition-leader", 1, 3, 0, 100, 3))
    verdict = c.rule_min_isr(g, ev)[1]
    assert verdict.startswith("Not reproduced: ISR with acks=all and min.insync.replicas=1 ")
    assert "(insufficient data: min.insync.replicas=2 has " in verdict
    assert "3 acknowledged writes (needs " in verdict


def test_min_isr_reports_every_short_side():
    g = frame(row("isr", "all", 1, True, False, 3, "isolate-partition-leader", 2, 10000, 5, 0, 0),
              row("isr", "all", 2, True, False, 3, "isolate-partition-leader", 1, 3, 0, 0, 0))
    assert c.rule_min_isr(g)[1].endswith(
        "(insufficient data: min.insync.replicas=1 has 2 runs (needs 5); "
        "min.insync.replicas=2 has 1 run (needs 5) and 3 acknowledged writes (needs 100)).")


@pytest.mark.parametrize("ev", EVIDENCE)
def test_minority_side_with_one_attempted_write_is_insufficient(ev):
    g = frame(row("quorum", "all", 2, False, False, 3, c.MINORITY, 1, 10, 0, 1, 0))
    verdict = c.rule_minority_side(g, ev)[-1]
    assert verdict.startswith("Not reproduced: quorum mode stops accepting writes on a "
                              "minority side (insufficient data: quorum mode has ")
    assert "1 write attempted during the fault (needs " in verdict


def test_enough_data_on_matched_cells_reproduces_each_claim():
    isr, q = "isr", "quorum"
    g = frame(
        # (a) min ISR 1 vs 2 under the same fault.
        row(isr, "all", 1, True, False, 3, "isolate-partition-leader", 20, 1000, 9, 200, 200),
        row(isr, "all", 2, True, False, 3, "isolate-partition-leader", 20, 500, 0, 200, 90),
        # (b), (c): quorum vs ISR, RF 3, under faults; nemesis none is left out of (b).
        row(q, "all", 2, False, False, 3, c.MINORITY, 20, 800, 0, 200, 0),
        row(isr, "all", 1, False, False, 3, c.MINORITY, 20, 900, 0, 200, 200),
        row(q, "all", 2, False, False, 3, "kill-2-of-3", 20, 300, 0, 200, 10),
        row(isr, "all", 1, False, False, 3, "kill-2-of-3", 20, 900, 0, 200, 190),
        row(q, "all", 2, False, False, 3, "none", 20, 5000, 0, 0, 0),
        # (d) unclean on vs off under the same two faults.
        row(isr, "all", 1, True, False, 3, "kill-2-of-3", 20, 1000, 30, 200, 195),
        row(isr, "all", 1, True, False, 3, c.MINORITY, 20, 1000, 10, 200, 200),
        # (e) ELR on vs off.
        row(isr, "all", 2, False, True, 3, c.LAST_REPLICA, 20, 700, 0, 200, 100),
        row(isr, "all", 2, False, False, 3, c.LAST_REPLICA, 20, 700, 7, 200, 100),
        # (f) epochs off vs on.
        row(isr, "1", 1, False, False, 3, "kill-leader", 20, 700, 4, 200, 200, epochs=False,
            divergent=3),
        row(isr, "1", 1, False, False, 3, "kill-leader", 20, 700, 0, 200, 200),
    )
    said = c.conclusions(g, pd.DataFrame({"source": [], "nemesis": []}))["sim"]
    verdicts = [s for s in said if s.startswith(("Reproduced", "Not reproduced"))]
    assert all(v.startswith("Reproduced: ") for v in verdicts), verdicts
    assert len(verdicts) == 7
    # (d) pools only the matched cells: the unclean-off min ISR 1 rows under the minority
    # fault (200 of 200) and kill-2-of-3 (190 of 200), against on's 395 of 400.
    unclean = next(s for s in said if s.startswith("Over the faults run with both settings"))
    assert "(40 of 2000, 40 runs) and served 98.8% of the writes attempted during the fault " \
           "(395 of 400, 40 runs); with it false, lost 0.0" in unclean
    assert "(390 of 400, 40 runs)" in unclean


def test_the_verdict_still_follows_the_numbers_once_the_data_suffices():
    g = frame(row("isr", "all", 1, True, False, 3, "kill-leader", 20, 1000, 0, 200, 200),
              row("isr", "all", 1, False, False, 3, "kill-leader", 20, 1000, 0, 200, 100))
    assert c.rule_unclean(g)[-1] == (
        "Not reproduced: unclean election trades loss for availability (it gained "
        "availability without more loss).")
    g.loc[0, "lost_writes"] = 4
    g.loc[0, "lost_per_million"] = 4000.0
    assert c.rule_unclean(g)[-1] == "Reproduced: unclean election trades loss for availability."
    # One lost write on the quorum side is a counterexample whatever the amount of data.
    q = frame(row("quorum", "all", 2, False, False, 3, "bridge", 1, 3, 1, 5, 3))
    assert c.rule_quorum_loss(q)[-1] == (
        "Not reproduced: quorum mode with acks=all loses no acknowledged write (it lost writes "
        "under bridge).")
