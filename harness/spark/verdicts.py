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

A mechanism sentence (`mechanism`) says what each arm's runs did under a fault, read from the
cell's own rows (harness/spark/paired.py cell_facts: runs whose ISR shrank, leader elections
and unclean ones, acknowledged writes lost, unavailable time, recovery) and each arm's settings
from harness/spark/arms.py, so it changes with the runs and never cites a setting the arm does
not have; it is shown only where the verdict is decisive (one arm better, or one arm lost
writes), and left out where the cell's facts are missing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from harness.spark.arms import ARMS, COMPARISONS, EQUAL_SAFETY, Arm, Comparison
from harness.spark.paired import CELL_KEYS
from harness.spark.stats import (
    A_BETTER,
    B_BETTER,
    EQUIVALENT,
    INCONCLUSIVE,
    INSUFFICIENT,
    METRIC_BY_COLUMN,
)

_MODE_NAMES = {"isr": "ISR", "quorum": "quorum", "raft": "Raft per partition"}


def arm_settings(arm: Arm) -> str:
    """The arm's settings in words, read from its settings and flush policy (never from its
    label, so the words cannot say a setting the arm does not have): `ISR (acks=all,
    min.insync.replicas=2, page-cache)`."""
    s = arm.settings
    mode = s.get("replication_mode")
    parts = [f"acks={s['acks']}"] if "acks" in s else []
    if mode == "isr" and "min_insync_replicas" in s:
        parts.append(f"min.insync.replicas={s['min_insync_replicas']}")
    parts += [word for key, word in (("eligible_leader_replicas", "ELR"),
                                     ("unclean_leader_election", "unclean election"))
              if s.get(key)]
    if s.get("leader_epoch_enable") is False:
        parts.append("leader epochs off")
    parts += [p for p in arm.flush_policies if p is not None][:1]
    name = _MODE_NAMES.get(str(mode), str(mode))
    return f"{name} ({', '.join(parts)})" if parts else name


def _num(value: Any) -> float | None:
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number


def _and(words: Sequence[str]) -> str:
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def _side(arm: Arm, facts: Mapping[str, Any], side: str, metric: str) -> str:
    """What one arm's runs of the cell did, from its columns of harness/spark/paired.py
    cell_facts."""
    def get(name: str) -> float | None:
        return _num(facts.get(f"{side}_{name}"))

    n = int(get("runs") or 0)
    said = []
    unavailable, served = get("unavail_ms_during"), get("avail_fault")
    if metric == "unavail_ms_during" and unavailable is not None:
        said.append(f"was unavailable {unavailable:,.0f} ms of the fault on average")
    elif served is not None:
        said.append(f"acknowledged {100 * served:.0f}% of the writes attempted during the fault")
    if arm.settings.get("replication_mode") == "isr" and get("shrink_runs") is not None:
        said.append(f"shrank its ISR in {int(get('shrink_runs') or 0)} of {n} runs")
    if get("election_runs") is not None:
        unclean = int(get("unclean_elections") or 0)
        said.append(f"elected a new leader in {int(get('election_runs') or 0)} of {n} runs"
                    + (f" ({unclean} of {int(get('elections') or 0)} elections unclean)"
                       if unclean else ""))
    lost = int(get("lost_writes") or 0)
    said.append(f"lost {lost:,} acknowledged writes in {int(get('lossy_runs') or 0)} of {n} runs"
                if lost else "lost no acknowledged write")
    recovery = get("recovery_ms")
    if recovery is not None:
        said.append(f"acknowledged again {recovery:,.0f} ms after the heal (median)")
    return f"{arm_settings(arm)} {_and(said)}"


def mechanism(c: Comparison, facts: Mapping[str, Any] | None,
              metric: str = "unavail_ms_during") -> str:
    """What each arm's runs did in one cell, from the cell's own rows (harness/spark/paired.py
    cell_facts: ISR shrinks, elections, losses, unavailable time, recovery), with each arm's
    settings read from harness/spark/arms.py; "" without facts (nothing is said that the rows
    do not show)."""
    if not facts or not _num(facts.get("a_runs")) or not _num(facts.get("b_runs")):
        return ""
    duration = _num(facts.get("fault_duration_ms"))
    over = (f"Over {int(_num(facts['a_runs']) or 0)} paired seeds of a "
            f"{duration / 1000:g} s fault: " if duration else "Over its paired seeds: ")
    return (over + _side(ARMS[c.a], facts, "a", metric) + "; "
            + _side(ARMS[c.b], facts, "b", metric) + ".")


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


def _cell_key(row: Mapping[str, Any]) -> tuple[Any, ...]:
    values = []
    for k in ("comparison", *CELL_KEYS):
        v = row.get(k)
        values.append(None if v is None or (isinstance(v, float) and math.isnan(v))
                      else int(v) if isinstance(v, float) and v.is_integer() else v)
    return tuple(values)


def comparison_verdicts(table: pd.DataFrame, safety: pd.DataFrame,
                        comparisons: Sequence[Comparison] = COMPARISONS,
                        source: str = "sim",
                        facts: pd.DataFrame | None = None) -> list[Verdict]:
    """One verdict per comparison with paired data (equal safety first, then trade-offs), in
    the cells of the default settings (no swept timeout) of `source`; `facts`
    (harness/spark/paired.py cell_facts) words each decisive cell's mechanism."""
    metric = primary_metric(table)
    by_cell = ({} if facts is None or facts.empty else
               {_cell_key(r): r for r in facts.to_dict("records")})
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
                decisive.append((nemesis, verdict,
                                 mechanism(c, by_cell.get(_cell_key(r.to_dict())), metric)))
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
