"""A verdict for each of the twelve reference scenarios (the project's list of Kafka replication
pitfalls, numbered 2.1 to 2.12 as there) that the matrix can show, from the per-group
aggregates (pandas, on the driver).

Each rule selects the groups of its scenario's fault and settings, and says `shown` or
`not shown` by a comparison of the numbers that could come out either way (its `claim` and
`why`), `no data` when the input lacks the cells, or `outside the matrix` with the test that
checks it when the matrix cannot show it (a message race, a unit-level rule). Rules reuse
harness/spark/conclude.py for the claims it already decides (2.1-2.2, 2.6, 2.7). Availability
is measured in time, from the open-loop probe's 10 ms slots (`probe_ok_during` of
`probe_slots_during`): a retrying producer's attempts hide an outage shorter than its delivery
timeout, so 2.5 does not reuse conclude's attempt-based claim (d).
tests/spark/test_reference.py runs every rule both ways on hand-made groups.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pandas as pd

from harness.spark import conclude as cc

SHOWN, NOT_SHOWN, NO_DATA, OUTSIDE = "shown", "not shown", "no data", "outside the matrix"


@dataclass(frozen=True, slots=True)
class Finding:
    ref: str
    title: str
    status: str
    sentence: str
    # The numbers the verdict was decided on, one row per setting compared (None: the
    # sentence says them all).
    evidence: pd.DataFrame | None = field(default=None, compare=False)


def _from_conclude(ref: str, title: str, said: list[str]) -> Finding:
    verdict = next((s for s in said if s.startswith(("Reproduced: ", "Not reproduced: "))), "")
    status = (SHOWN if verdict.startswith("Reproduced") else
              NO_DATA if verdict.endswith(cc.NO_DATA) else NOT_SHOWN)
    return Finding(ref, title, status, " ".join(said))


def _pool(g: pd.DataFrame, **match: object) -> cc.Pooled | None:
    return cc.pool(g, **match)


def _time_availability(g: pd.DataFrame) -> float | None:
    if g.empty or "probe_slots_during" not in g.columns:
        return None
    slots = float(g["probe_slots_during"].fillna(0).sum())
    return float(g["probe_ok_during"].fillna(0).sum()) / slots if slots else None


def _enough(p: cc.Pooled | None, ev: cc.Evidence) -> bool:
    return p is not None and p.runs >= ev.min_runs


def kip101(g: pd.DataFrame, ev: cc.Evidence) -> Finding:
    return _from_conclude("2.1-2.2", "truncation to the HW and silent divergence (KIP-101)",
                          cc.rule_kip101(g, ev))


def kip279(g: pd.DataFrame, ev: cc.Evidence) -> Finding:
    title = "back-to-back leader elections (KIP-279)"
    rows = cc.select(g, nemesis="fast-leader-changes", leader_epoch_enable=True, acks="all")
    p = cc.pool_frame(rows)
    if not _enough(p, ev):
        return Finding("2.3", title, NO_DATA, "No runs of fast-leader-changes with leader "
                                              "epochs on and acks=all.")
    assert p is not None
    elections = float((rows["leader_elections_mean"] * rows["runs"]).sum() / p.runs)
    ok = elections >= 2 and p.divergent_runs == 0
    why = ("fewer than two elections per run" if elections < 2 else
           f"{p.divergent_runs} runs ended divergent")
    return Finding("2.3", title, SHOWN if ok else NOT_SHOWN,
                   f"Under fast-leader-changes ({elections:.1f} leader elections per run, "
                   f"{p.runs} runs), {p.divergent_runs} runs ended with replicas disagreeing "
                   f"below their HWs and {p.lost} of {p.acked} acknowledged writes were lost"
                   + ("." if ok else f": {why}."))


def zombie(g: pd.DataFrame, ev: cc.Evidence) -> Finding:
    title = "zombie leader: acks=1 writes lost, acks=all ones not"
    base = dict(nemesis="zombie-leader", replication_mode="isr")
    one = _pool(cc.default_durability(g), acks="1", **base)
    every = _pool(cc.default_durability(g), acks="all", min_insync_replicas=2, **base)
    if not (_enough(one, ev) and _enough(every, ev)):
        return Finding("2.4", title, NO_DATA, "No ISR runs of zombie-leader with both acks=1 "
                                              "and acks=all, min.insync.replicas=2.")
    assert one is not None and every is not None
    ok = one.lost > 0 and every.lost == 0
    return Finding("2.4", title, SHOWN if ok else NOT_SHOWN,
                   f"Under zombie-leader, ISR with acks=1 {cc.lost(one)}; with acks=all and "
                   f"min.insync.replicas=2 it {cc.lost(every)}.")


def unclean(g: pd.DataFrame, ev: cc.Evidence) -> Finding:
    """2.5: unclean election on against off (ISR, acks=all, min.insync.replicas=1), pooled over
    the fault cells run with both: shown when it lost more acknowledged writes per million AND
    served more of the probe's slots during the fault (the trade), not shown otherwise."""
    title = "unclean election loses what the new leader lacked"
    base = dict(replication_mode="isr", acks="all", min_insync_replicas=1,
                eligible_leader_replicas=False, leader_epoch_enable=True)
    fg = cc.faulted(cc.default_durability(g))
    on_rows, off_rows = cc.matched(cc.select(fg, unclean_leader_election=True, **base),
                                   cc.select(fg, unclean_leader_election=False, **base),
                                   ("unclean_leader_election",))
    on, off = cc.pool_frame(on_rows), cc.pool_frame(off_rows)
    on_t, off_t = _time_availability(on_rows), _time_availability(off_rows)
    if on is None or off is None or on_t is None or off_t is None:
        return Finding("2.5", title, NO_DATA, "No probed fault cells of ISR (acks=all, "
                                              "min.insync.replicas=1) run with unclean election "
                                              "both on and off.")
    short = cc.insufficient(*(cc.shortfall(p, name, ev, acked=True)
                              for p, name in ((on, "unclean on"), (off, "unclean off"))),
                            *(f"{name} has {slots} probe slots during the fault (needs "
                              f"{ev.min_attempted})"
                              for rows, name in ((on_rows, "unclean on"), (off_rows, "unclean off"))
                              if (slots := _probe_slots(rows)) < ev.min_attempted))
    said = (f"Over the {cc.count(on.nemeses, 'fault')} run with both settings, ISR (acks=all, "
            f"min.insync.replicas=1) with unclean election {cc.lost(on)} and served "
            f"{cc.fmt_pct(on_t)} of the probe's 10 ms slots during the fault; without it "
            f"{cc.lost(off)} and served {cc.fmt_pct(off_t)}")
    if short:
        return Finding("2.5", title, NOT_SHOWN, f"{said} ({short}).")
    assert on.lost_per_million is not None and off.lost_per_million is not None
    more_loss = on.lost_per_million > off.lost_per_million
    more_time = on_t > off_t
    if more_loss and more_time:
        return Finding("2.5", title, SHOWN, f"{said}: more time served, paid for with the "
                                            f"acknowledged writes the new leader lacked.")
    why = ("it lost more without serving more of the time" if more_loss else
           "it served more of the time without losing more" if more_time else
           "neither more loss nor more time served")
    return Finding("2.5", title, NOT_SHOWN, f"{said}: {why}.")


def _probe_slots(rows: pd.DataFrame) -> int:
    return int(rows["probe_slots_during"].fillna(0).sum()) if "probe_slots_during" in rows else 0


def min_isr_one(g: pd.DataFrame, ev: cc.Evidence) -> Finding:
    return _from_conclude("2.6", "an ISR of one with min.insync.replicas=1",
                          cc.rule_min_isr(g, ev))


def last_replica(g: pd.DataFrame, ev: cc.Evidence) -> Finding:
    title = "last replica standing (KIP-966): ELR against an unclean election"
    base = dict(nemesis="staggered-isr-drop-then-leader-crash", replication_mode="isr",
                acks="all", min_insync_replicas=2, leader_epoch_enable=True)
    g = cc.default_durability(g)
    elr = _pool(g, eligible_leader_replicas=True, unclean_leader_election=False, **base)
    dirty = _pool(g, eligible_leader_replicas=False, unclean_leader_election=True, **base)
    if not (_enough(elr, ev) and _enough(dirty, ev)):
        return _from_conclude("2.7", title, cc.rule_elr(g, ev))
    assert elr is not None and dirty is not None
    ok = elr.lost == 0 and dirty.lost > 0
    return Finding("2.7", title, SHOWN if ok else NOT_SHOWN,
                   f"When the ISR dropped to the leader one follower at a time and the leader "
                   f"then lost power, ISR (acks=all, min.insync.replicas=2) with ELR "
                   f"{cc.lost(elr)}; with an unclean election instead it {cc.lost(dirty)}. "
                   + " ".join(cc.rule_elr(g, ev)))


def stale_epoch(g: pd.DataFrame, ev: cc.Evidence) -> Finding:
    return Finding("2.8", "a stale broker epoch rejoins the ISR (KIP-903)", OUTSIDE,
                   "A race between an AlterPartition in flight and a broker's restart with an "
                   "empty disk: checked message by message in "
                   "tests/controller/test_alter_partition.py "
                   "(test_stale_member_broker_epoch_kip_903: INELIGIBLE_REPLICA).")


def fenced(g: pd.DataFrame, ev: cc.Evidence) -> Finding:
    title = "a fenced replica may not rejoin the ISR (KIP-841)"
    p = _pool(g, nemesis="fenced-follower-rejoins", acks="all")
    if not _enough(p, ev):
        return Finding("2.9", title, NO_DATA, "No runs of fenced-follower-rejoins.")
    assert p is not None
    ok = p.lost == 0 and p.anomalous == 0
    return Finding("2.9", title, SHOWN if ok else NOT_SHOWN,
                   f"Under fenced-follower-rejoins (a follower cut from the controllers, still "
                   f"fetching), acks=all runs {cc.lost(p)}, {p.anomalous} anomalous; that the "
                   f"fenced follower never re-enters the ISR while fenced is checked event by "
                   f"event in tests/sim/test_study_shapes.py.")


def controller_failover(g: pd.DataFrame, ev: cc.Evidence) -> Finding:
    title = "metadata-quorum leader change under the data plane"
    rows = cc.select(cc.default_durability(g), nemesis="isolate-controller-leader", acks="all")
    avail = _time_availability(rows)
    if avail is None or cc.pool_frame(rows) is None:
        return Finding("2.10", title, NO_DATA, "No probed runs of isolate-controller-leader.")
    ok = avail >= 0.99
    return Finding("2.10", title, SHOWN if ok else NOT_SHOWN,
                   f"While the active controller was cut off and replaced, the partition served "
                   f"{cc.fmt_pct(avail)} of the probe's 10 ms slots (acks=all, every mode): "
                   + ("the data plane does not wait on a controller failover."
                      if ok else "the data plane waited on the controller's failover.")
                   + " Check-quorum, pre-vote and the figure-8 rule are tested in tests/raft.")


def control_plane(g: pd.DataFrame, ev: cc.Evidence) -> Finding:
    title = "the data plane depends on the control plane"
    g = cc.default_durability(g)
    isr = cc.select(g, nemesis="metadata-quorum-down-kill-follower", replication_mode="isr",
                    acks="all", min_insync_replicas=2)
    quorum = cc.select(g, nemesis="metadata-quorum-down-kill-follower",
                       replication_mode="quorum", acks="all")
    a, b = _time_availability(isr), _time_availability(quorum)
    if a is None or b is None:
        return Finding("2.11", title, NO_DATA, "No probed ISR and quorum runs of "
                                               "metadata-quorum-down-kill-follower.")
    ok = a < 0.05 and b > 0.95
    return Finding("2.11", title, SHOWN if ok else NOT_SHOWN,
                   f"With the metadata quorum down and a follower dead, ISR (acks=all, "
                   f"min.insync.replicas=2) served {cc.fmt_pct(a)} of the probe's slots (the "
                   f"ISR cannot shrink without the controller); quorum mode served "
                   f"{cc.fmt_pct(b)}.")


# A record acknowledged under acks=1 that stays invisible this long was held back by a frozen
# HW, not by replication: a healthy fetch round takes a few fsyncs and the fetch wait (200 ms),
# and the ISR's lag time (2 s) only starts the shrink. Strict min ISR freezes the HW for the
# rest of the fault.
FROZEN_HW_MS = 1000.0
STRICT_EVIDENCE = ("acks", "runs", "acked_writes", "lost_writes", "write_availability_fault",
                   "time_availability_fault", "visibility_lag_p99_ms", "visibility_lag_max_ms")


def _strict_evidence(rows: pd.DataFrame) -> pd.DataFrame:
    """Per acks setting: runs, acknowledged and lost writes, availability (attempts and probe
    time), the visibility lag (the median of the groups' p99, the longest of any run)."""
    out = []
    for acks, g in rows.groupby("acks", sort=True):
        p = cc.pool_frame(g)
        assert p is not None
        lag = g["visibility_lag_p99_ms"].dropna() if "visibility_lag_p99_ms" in g else g.iloc[0:0]
        worst = g["visibility_lag_max_ms"].dropna() if "visibility_lag_max_ms" in g else lag
        out.append({"acks": acks, "runs": p.runs, "acked_writes": p.acked,
                    "lost_writes": p.lost, "write_availability_fault": p.write_availability_fault,
                    "time_availability_fault": _time_availability(g),
                    "visibility_lag_p99_ms": float(lag.median()) if len(lag) else None,
                    "visibility_lag_max_ms": float(worst.max()) if len(worst) else None})
    return pd.DataFrame(out, columns=list(STRICT_EVIDENCE))


def strict_min_isr(g: pd.DataFrame, ev: cc.Evidence) -> Finding:
    """2.12: with the ISR below min.insync.replicas=2, acks=1 writes are accepted (more than
    90% served), none lost, and invisible to consumers while the HW is frozen (the visibility
    lag's p99 at least FROZEN_HW_MS). Evidence: acks=1 beside acks=all."""
    title = "strict min ISR: acks=1 writes accepted below min.insync.replicas, none lost"
    rows = cc.select(cc.default_durability(g), nemesis="leader-cut-from-followers-only",
                     replication_mode="isr", min_insync_replicas=2)
    p = cc.pool_frame(cc.select(rows, acks="1"))
    if not _enough(p, ev) or p is None or p.write_availability_fault is None:
        return Finding("2.12", title, NO_DATA, "No ISR runs with acks=1, "
                                               "min.insync.replicas=2 under "
                                               "leader-cut-from-followers-only.")
    evidence = _strict_evidence(rows)
    lag = evidence.set_index("acks").at["1", "visibility_lag_p99_ms"]
    if lag is None or pd.isna(lag):
        return Finding("2.12", title, NO_DATA, f"With the ISR below min.insync.replicas=2, "
                       f"acks=1 {cc.served(p)} and {cc.lost(p)}; the runs do not measure how "
                       f"long the records stayed invisible (no visibility lag).", evidence)
    frozen = lag >= FROZEN_HW_MS
    ok = p.lost == 0 and p.write_availability_fault > 0.9 and frozen
    why = ("" if frozen else f"; the HW did not freeze: the p99 visibility lag "
           f"{lag:.0f} ms is below {FROZEN_HW_MS:.0f} ms")
    return Finding("2.12", title, SHOWN if ok else NOT_SHOWN,
                   f"With the ISR below min.insync.replicas=2, acks=1 {cc.served(p)} and "
                   f"{cc.lost(p)}; consumers saw those records only once the ISR recovered "
                   f"and the HW moved (KIP-966 strict min ISR): their p99 visibility lag was "
                   f"{lag:.0f} ms (median over groups), the longest "
                   f"{evidence.set_index('acks').at['1', 'visibility_lag_max_ms']:.0f} ms"
                   f"{why}.", evidence)


RULES: tuple[Callable[[pd.DataFrame, cc.Evidence], Finding], ...] = (
    kip101, kip279, zombie, unclean, min_isr_one, last_replica, stale_epoch, fenced,
    controller_failover, control_plane, strict_min_isr)


def findings(groups: pd.DataFrame, ev: cc.Evidence = cc.DEFAULT_EVIDENCE,
             source: str = "sim") -> list[Finding]:
    g = groups[groups["source"] == source] if "source" in groups.columns else groups
    return [rule(g, ev) for rule in RULES]
