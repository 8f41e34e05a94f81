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

A mechanism sentence (`mechanism`: AVAILABILITY by what differs between the arms, LOSS by the
losing arm's durability) says why the arms differ under a fault: it is shown only where the
verdict is decisive (one arm better, or one arm lost writes).
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

# Why the arms differ under a fault, one sentence each, from how the shapes act
# (harness/sim/faults) and the replica core's rules: by what differs between the arms (the
# comparison's axis) and the fault; `mechanism` picks one for a decisive cell.
_WAIT_LAG = ("ISR waits for every in-sync follower until replica.lag.time.max.ms drops the one "
             "it lost; a majority commit goes on with the follower it still reaches.")
_NO_ISR_LEFT = ("ISR shrank to the leader before it was fenced, so no follower may be elected "
                "and the partition waits for the old leader; quorum mode elects from the "
                "majority that reports its log.")
_RAFT_ELECTS = ("a Raft partition elects its leader among its own replicas (pre-vote, "
                "check-quorum) as soon as a majority stops hearing the old one, without waiting "
                "for the controller to fence it or to choose.")
AVAILABILITY: dict[tuple[str, str], str] = {
    **{("raft", n): _RAFT_ELECTS for n in (
        "isolate-partition-leader", "cut-followers-then-kill-leader",
        "staggered-isr-drop-then-leader-crash", "unclean-crash-losing-unflushed-tail",
        "leader-cut-from-followers-only", "zombie-leader", "metadata-quorum-down-kill-leader",
        "flapping")},
    ("mode", "bridge"): _WAIT_LAG,
    ("mode", "random-halves"): _WAIT_LAG,
    ("mode", "majorities-ring"): _WAIT_LAG,
    ("mode", "follower-gc-pauses"): (
        "each pause longer than the session or lag timeout takes the follower out of the ISR "
        "and back, and acks=all waits on it until then; a majority commit does not wait on it."),
    ("mode", "isolate-partition-leader"): _NO_ISR_LEFT,
    ("mode", "cut-followers-then-kill-leader"): _NO_ISR_LEFT,
    ("mode", "staggered-isr-drop-then-leader-crash"): _NO_ISR_LEFT,
    ("mode", "metadata-quorum-down-kill-follower"): (
        "ISR cannot drop the dead follower without the controller, so acks=all waits on it "
        "until the quorum returns; a majority commit needs only the leader and the live "
        "follower."),
    ("mode", "kill-2-of-3"): (
        "one live replica is below a majority, so quorum mode stops; ISR with "
        "min.insync.replicas=1 keeps acknowledging on it."),
    ("mode", "leader-cut-from-followers-only"): (
        "the leader keeps its controller session: ISR with min.insync.replicas=1 shrinks to it "
        "and acknowledges alone, while no majority answers a quorum leader."),
    ("mode", "unclean-crash-losing-unflushed-tail"): (
        "ISR with min.insync.replicas=1 acknowledges on the leader alone while it is cut off; "
        "a quorum leader without a majority acknowledges nothing."),
    ("elr", "isolate-partition-leader"): (
        "the followers dropped while the ISR was below min.insync.replicas stay eligible "
        "(ELR), so one is elected cleanly once the leader is fenced, instead of waiting for "
        "the old leader."),
    ("elr", "cut-followers-then-kill-leader"): (
        "the followers dropped while the ISR was below min.insync.replicas stay eligible "
        "(ELR), so one is elected cleanly once the dead leader is fenced."),
    ("elr", "staggered-isr-drop-then-leader-crash"): (
        "ELR keeps the follower that left the ISR last eligible, so it is elected instead of "
        "waiting for the leader's return."),
    ("unclean", "isolate-partition-leader"): (
        "an unclean election puts an out-of-sync follower in charge without waiting for the "
        "old leader."),
    ("unclean", "cut-followers-then-kill-leader"): (
        "an unclean election puts an out-of-sync follower in charge without waiting for the "
        "dead leader's return."),
}
LOSS: dict[tuple[str, str], str] = {
    ("page-cache", "power-loss-all-brokers"): (
        "on the page cache, a power loss of every replica takes the acknowledged writes not "
        "yet written back: replication is Kafka's durability, and this fault takes every "
        "replica."),
    ("page-cache", "unclean-crash-losing-unflushed-tail"): (
        "the leader alone in the ISR lost its unflushed tail and was re-elected with the short "
        "log (no ELR: nobody else was eligible)."),
    ("page-cache", "staggered-isr-drop-then-leader-crash"): (
        "the leader, last in the ISR, lost its unflushed tail and came back as leader with a "
        "short log (without ELR); an unclean election may elect the follower that left first."),
    ("no-fsync", "power-loss-all-brokers"): (
        "without an fsync before counting, a majority that loses power together forgets what "
        "it acknowledged."),
    ("any", "zombie-leader"): (
        "acks=1 is acknowledged by the leader alone, also by a deposed leader that clients "
        "still reach: its writes are truncated when it learns the new epoch."),
    ("any", "cut-followers-then-kill-leader"): (
        "the leader acknowledged alone (min.insync.replicas=1) while cut off; the follower "
        "elected uncleanly lacked those writes."),
    ("any", "isolate-partition-leader"): (
        "the leader acknowledged alone (min.insync.replicas=1) while cut off; the follower "
        "elected after it lacked those writes."),
}


def mechanism(c: Comparison, nemesis: str, verdict: str) -> str:
    """The sentence that says why the arms differ under `nemesis` ("" if none is known)."""
    if verdict in ("a-lost", "b-lost"):
        arm = ARMS[c.a if verdict == "a-lost" else c.b]
        policies = [p for p in arm.flush_policies if p is not None] or ["any"]
        return LOSS.get((policies[0], nemesis)) or LOSS.get(("any", nemesis), "")
    found = AVAILABILITY.get((c.axis, nemesis))
    if found is None and c.axis == "raft":  # the majority commit's mechanisms hold for Raft too
        found = AVAILABILITY.get(("mode", nemesis))
    return found or ""


DEFAULT_FAULT_MS = 5000  # the study's fault duration (the duration curve apart)


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
                nemesis, verdict = str(r["nemesis"]), str(r["verdict"])
                decisive.append((nemesis, verdict, mechanism(c, nemesis, verdict)))
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
    if "fault_duration_ms" in sel.columns and (sel["fault_duration_ms"] == DEFAULT_FAULT_MS).any():
        sel = sel[sel["fault_duration_ms"] == DEFAULT_FAULT_MS]
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
