"""The report's verdicts on the comparisons of harness/spark/arms.py, from the paired tables
(harness/spark/paired.py): a headline per comparison, the faults behind it with their mechanism,
the evidence, and the runs that reproduce a loss.

Rules (each can come out either way; tests/spark/test_verdicts.py runs them both ways):
- availability: per fault cell, the paired verdict of `primary_metric` (time-based unavailability
  from the open-loop probe when the runs have it, else write availability by attempts), decided
  by harness/spark/stats.decide with the margin stated in the report before the numbers. The
  headline counts the faults where b is better, a is better, the two are equivalent within the
  margin, or the data cannot tell (inconclusive, or too few seeds);
- safety: per fault cell, which arm lost an acknowledged write in some run (its first seed is
  the reproduction); for an arm that lost none, the 95% Wilson upper bound of its loss rate.

A mechanism sentence (MECHANISMS) says why the arms differ under a fault: it is shown only where
the verdict is decisive (one arm better, or one arm lost writes).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from harness.spark.arms import ARMS, COMPARISONS, EQUAL_SAFETY, Comparison
from harness.spark.stats import (
    A_BETTER,
    B_BETTER,
    EQUIVALENT,
    INCONCLUSIVE,
    INSUFFICIENT,
    METRIC_BY_COLUMN,
)

# Why ISR-style and majority-style replication behave differently under a fault: one sentence
# per nemesis, from how the shapes act (harness/sim/faults) and the replica core's rules.
MECHANISMS: dict[str, str] = {
    "metadata-quorum-down-kill-follower": (
        "ISR cannot drop the dead follower without the controller, so acks=all waits on it "
        "until the quorum returns; a majority commit needs only the leader and the live "
        "follower."),
    "metadata-quorum-down-kill-leader": (
        "no leader can be elected while the metadata quorum is down, in any mode: the partition "
        "waits for the controller."),
    "kill-2-of-3": (
        "one live replica is below a majority, so quorum mode stops; ISR with "
        "min.insync.replicas=2 stops too once the ISR shrinks below 2."),
    "kill-leader": (
        "the dead leader is replaced after broker.session.timeout.ms in every mode; the modes "
        "differ in how the new leader is chosen (ISR member, or the longest log of a majority's "
        "reports)."),
    "pause-leader": (
        "a stopped leader keeps its session until broker.session.timeout.ms, then is replaced "
        "as if dead."),
    "isolate-partition-leader": (
        "the leader cut from its followers cannot commit in either mode; ISR waits "
        "replica.lag.time.max.ms to shrink, quorum mode stops at once, and both wait for the "
        "controller to fence it when it is cut from everyone."),
    "leader-cut-from-followers-only": (
        "the leader keeps its controller session: ISR shrinks to the leader after "
        "replica.lag.time.max.ms and refuses acks=all below min.insync.replicas, while no "
        "majority ever answers a quorum leader."),
    "zombie-leader": (
        "the leader cut from the controllers is replaced after its session expires, but "
        "clients still reach it: acks=1 writes it takes are truncated when it rejoins."),
    "follower-gc-pauses": (
        "each pause longer than the session or lag timeout takes the follower out of the ISR "
        "and back; a majority commit needs any two of three and does not wait on it."),
    "staggered-isr-drop-then-leader-crash": (
        "the ISR shrinks to the leader one follower at a time, then the leader loses power: "
        "ELR keeps the last follower eligible, an unclean election may take the first, and "
        "without either the leader returns with a short log."),
    "power-loss-all-brokers": (
        "every replica loses what it did not fsync: an fsync before the acknowledgement keeps "
        "the acknowledged writes, the page cache does not."),
    "fast-leader-changes": (
        "two leader changes in quick succession: truncation by leader epoch (KIP-279) must "
        "iterate to the common epoch."),
    "fenced-follower-rejoins": (
        "a fenced follower still fetching may not rejoin the ISR (KIP-841); the leader keeps "
        "committing with the others."),
    "unclean-crash-losing-unflushed-tail": (
        "the leader alone in the ISR loses its unflushed tail: without ELR it is re-elected "
        "with a short log (KIP-966)."),
    "cut-followers-then-kill-leader": (
        "the ISR shrank to the leader before it died: with min.insync.replicas=2 nothing was "
        "acknowledged after the shrink; quorum mode committed only on a majority."),
}


@dataclass(frozen=True, slots=True)
class Reproduction:
    comparison: str
    arm: str
    nemesis: str
    seed: int
    run_id: str
    command: str | None
    lost_writes: int


@dataclass(slots=True)
class Verdict:
    comparison: Comparison
    metric: str
    headline: str
    safety: str
    decisive: list[tuple[str, str, str]] = field(default_factory=list)  # nemesis, verdict, why
    evidence: pd.DataFrame = field(default_factory=pd.DataFrame)
    reproductions: list[Reproduction] = field(default_factory=list)

    @property
    def title(self) -> str:
        a, b = ARMS[self.comparison.a], ARMS[self.comparison.b]
        return f"{b.label} vs {a.label}"


def primary_metric(table: pd.DataFrame) -> str:
    """The availability metric the verdicts use: time-based when the runs had the probe."""
    if not table.empty and (table["metric"] == "unavail_ms_during").any():
        return "unavail_ms_during"
    return "avail_fault"


def _names(rows: pd.DataFrame) -> str:
    return ", ".join(sorted(str(n) for n in rows["nemesis"].unique())) or "none"


def _count(rows: pd.DataFrame, verdict: str) -> pd.DataFrame:
    return rows[rows["verdict"] == verdict]


def availability_headline(c: Comparison, rows: pd.DataFrame, metric: str) -> str:
    a, b = ARMS[c.a].label, ARMS[c.b].label
    m = METRIC_BY_COLUMN[metric]
    if rows.empty or "verdict" not in rows.columns:
        return f"{b} against {a}: no fault was run with both (no paired seeds)."
    better, worse = _count(rows, B_BETTER), _count(rows, A_BETTER)
    same = _count(rows, EQUIVALENT)
    unsure = rows[rows["verdict"].isin([INCONCLUSIVE, INSUFFICIENT])]
    margin = f"{m.margin:g} {m.unit}" if m.unit != "fraction" else f"{100 * m.margin:g} pp"
    label = "trade-off" if c.kind != EQUAL_SAFETY else "equal safety"
    return (f"{label.capitalize()} ({c.why}): by {m.label}, {b} did better than {a} under "
            f"{len(better)} of {len(rows)} faults ({_names(better)}), worse under {len(worse)} "
            f"({_names(worse)}), the same within {margin} under {len(same)}, and the seeds "
            f"could not tell under {len(unsure)} ({_names(unsure)}).")


def safety_sentence(c: Comparison, rows: pd.DataFrame) -> str:
    a, b = ARMS[c.a].label, ARMS[c.b].label
    if rows.empty:
        return ""
    a_lost = rows[rows["verdict"].isin(["a-lost", "both-lost"])]
    b_lost = rows[rows["verdict"].isin(["b-lost", "both-lost"])]
    clean = rows[rows["verdict"] == "neither-lost"]
    said = []
    for label, lost, side in ((a, a_lost, "a"), (b, b_lost, "b")):
        if lost.empty:
            said.append(f"{label} lost no acknowledged write under any fault")
        else:
            said.append(f"{label} lost acknowledged writes under {_names(lost)} "
                        f"({int(lost[f'{side}_lossy_runs'].sum())} of "
                        f"{int(lost[f'{side}_runs'].sum())} runs)")
    bound = ""
    if not clean.empty:
        high = max(float(clean["a_lossy_high"].max()), float(clean["b_lossy_high"].max()))
        bound = (f"; where neither lost any ({len(clean)} faults), a loss rate above "
                 f"{100 * high:.0f}% per run is excluded at 95% (Wilson)")
    return "; ".join(said) + bound + "."


def _evidence(rows: pd.DataFrame, safety: pd.DataFrame) -> pd.DataFrame:
    cols = ["nemesis", "fault_duration_ms", "seeds", "mean_a", "mean_b", "diff", "diff_low",
            "diff_high", "verdict"]
    ev = (rows[[c for c in cols if c in rows.columns]].copy() if not rows.empty
          else pd.DataFrame(columns=cols))
    if not safety.empty:
        loss = safety[["nemesis", "fault_duration_ms", "a_lossy_runs", "a_runs", "b_lossy_runs",
                       "b_runs", "verdict", "a_lossy_seeds", "b_lossy_seeds"]].rename(
            columns={"verdict": "loss_verdict"})
        ev = ev.merge(loss, on=["nemesis", "fault_duration_ms"], how="outer")
    return ev.sort_values(["nemesis", "fault_duration_ms"]).reset_index(drop=True)


def _reproductions(c: Comparison, safety: pd.DataFrame) -> list[Reproduction]:
    out: list[Reproduction] = []
    for _, row in safety.iterrows():
        for side, arm in (("a", c.a), ("b", c.b)):
            seeds = str(row.get(f"{side}_lossy_seeds") or "")
            if not seeds:
                continue
            out.append(Reproduction(c.key, arm, str(row["nemesis"]), int(seeds.split(",")[0]),
                                    str(row[f"{side}_repro_run"]),
                                    row.get(f"{side}_repro_command"),
                                    int(row.get(f"{side}_lost_writes") or 0)))
    return out


def comparison_verdicts(table: pd.DataFrame, safety: pd.DataFrame,
                        comparisons: Sequence[Comparison] = COMPARISONS,
                        source: str = "sim") -> list[Verdict]:
    """One verdict per comparison with paired data (equal safety first, then trade-offs), in
    the cells of the default settings (no swept timeout) of `source`."""
    metric = primary_metric(table)
    out = []
    for c in sorted(comparisons, key=lambda c: c.kind != EQUAL_SAFETY):
        rows = _default_cells(table, c.key, source)
        rows = rows[rows["metric"] == metric] if not rows.empty else rows
        loss = _default_cells(safety, c.key, source)
        if rows.empty and loss.empty:
            continue
        decisive = []
        for frame, kinds in ((rows, [A_BETTER, B_BETTER]), (loss, ["a-lost", "b-lost"])):
            if frame.empty:
                continue
            for _, r in frame[frame["verdict"].isin(kinds)].iterrows():
                decisive.append((str(r["nemesis"]), str(r["verdict"]),
                                 MECHANISMS.get(str(r["nemesis"]), "")))
        out.append(Verdict(c, metric, availability_headline(c, rows, metric),
                           safety_sentence(c, loss), decisive, _evidence(rows, loss),
                           _reproductions(c, loss)))
    return out


def _default_cells(frame: pd.DataFrame, key: str, source: str) -> pd.DataFrame:
    """The comparison's cells at the study's default timeouts and RF 3 (the curves apart)."""
    if frame.empty:
        return frame
    sel = frame[(frame["comparison"] == key) & (frame["source"] == source)]
    if "replication_factor" in sel.columns:
        sel = sel[sel["replication_factor"] == 3]
    for column, default in (("replica_lag_time_max_ms", 2000),
                            ("broker_session_timeout_ms", 1000)):
        if column in sel.columns:
            sel = sel[sel[column].isna() | (sel[column] == default)]
    return sel


def verdict_lines(verdicts: Sequence[Verdict]) -> list[str]:
    """The verdicts as markdown bullets (report.md and the command's output)."""
    lines: list[str] = []
    for v in verdicts:
        lines.append(f"- **{v.title}.** {v.headline} {v.safety}".rstrip())
        for nemesis, verdict, why in v.decisive:
            if why:
                lines.append(f"  - {nemesis} ({verdict}): {why}")
    return lines


def as_records(verdicts: Sequence[Verdict]) -> list[dict[str, Any]]:
    return [{"comparison": v.comparison.key, "kind": v.comparison.kind, "title": v.title,
             "metric": v.metric, "headline": v.headline, "safety": v.safety}
            for v in verdicts]
