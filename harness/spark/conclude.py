"""The report's conclusion: every sentence is produced by a rule over the aggregates.

Input is the per-group aggregate table (aggregate.summarize over GROUP_KEYS, collected as a
pandas DataFrame: at most a few thousand rows) and the quorum-vs-ISR pairs. A rule selects the
groups it talks about, pools their *sums* (never averages of ratios) and states what the numbers
show; a subject without rows is reported as "no data", never guessed. The rules follow the
claims of issue 8's acceptance list (kafka-replication reference, section 2), but the verdict
words (prevented, reduced, did not reduce, ...) come from comparing the pooled numbers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

# The durability defaults a rule holds fixed unless it varies them.
SAFE = {"unclean_leader_election": False, "eligible_leader_replicas": False,
        "leader_epoch_enable": True}


@dataclass(frozen=True, slots=True)
class Pooled:
    """Sums over the matching groups."""

    groups: int
    runs: int
    acked: int
    lost: int
    w_att_fault: int
    w_ok_fault: int
    anomalous: int
    divergent_runs: int
    divergent_offsets: int
    nemeses: int

    @property
    def lost_per_million(self) -> float | None:
        return self.lost * 1e6 / self.acked if self.acked else None

    @property
    def write_availability_fault(self) -> float | None:
        return self.w_ok_fault / self.w_att_fault if self.w_att_fault else None


def pool(groups: pd.DataFrame, **match: Any) -> Pooled | None:
    """Pool the groups whose columns equal `match` (a list value means any of them)."""
    sel = groups
    for column, value in match.items():
        if isinstance(value, list | tuple):
            sel = sel[sel[column].isin(value)]
        else:
            sel = sel[sel[column] == value]
    if sel.empty:
        return None

    def total(col: str) -> int:
        return int(sel[col].fillna(0).sum())

    return Pooled(groups=len(sel), runs=total("runs"), acked=total("acked_writes"),
                  lost=total("lost_writes"), w_att_fault=total("w_att_fault"),
                  w_ok_fault=total("w_ok_fault"), anomalous=total("anomalous_runs"),
                  divergent_runs=total("divergent_runs"),
                  divergent_offsets=total("divergent_offsets"),
                  nemeses=int(sel["nemesis"].nunique()))


def count(n: int, noun: str, plural: str | None = None) -> str:
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def fmt_pm(value: float) -> str:
    return f"{value:.1f}"


def fmt_pct(value: float) -> str:
    return f"{100 * value:.1f}%"


def lost(p: Pooled | None) -> str:
    if p is None:
        return "has no data"
    if p.lost_per_million is None:
        return f"acknowledged no writes ({count(p.runs, 'run')})"
    return (f"lost {fmt_pm(p.lost_per_million)} acknowledged writes per million "
            f"({p.lost} of {p.acked}, {count(p.runs, 'run')})")


def served(p: Pooled | None) -> str:
    if p is None:
        return "has no data"
    if p.write_availability_fault is None:
        return f"attempted no writes during a fault ({count(p.runs, 'run')})"
    return (f"served {fmt_pct(p.write_availability_fault)} of the writes attempted during the "
            f"fault ({p.w_ok_fault} of {p.w_att_fault}, {count(p.runs, 'run')})")


def _cmp(a: float | None, b: float | None) -> str | None:
    if a is None or b is None:
        return None
    return "lower" if a < b else "higher" if a > b else "equal"


def rule_min_isr(g: pd.DataFrame) -> list[str]:
    nem = "leader-cut-from-followers-only"
    base = dict(SAFE, replication_mode="isr", acks="all", nemesis=nem)
    one, two = pool(g, min_insync_replicas=1, **base), pool(g, min_insync_replicas=2, **base)
    out = [f"Under {nem}, ISR with acks=all and min.insync.replicas=1 {lost(one)}; "
           f"with min.insync.replicas=2 it {lost(two)}."]
    a = one.lost_per_million if one else None
    b = two.lost_per_million if two else None
    if a is not None and b is not None:
        if a > 0 and b == 0:
            out.append("So min.insync.replicas=2 prevented the loss seen with "
                       "min.insync.replicas=1 there.")
        elif b < a:
            out.append("So min.insync.replicas=2 reduced that loss but did not prevent it.")
        elif a == b == 0:
            out.append("Neither setting lost an acknowledged write there.")
        else:
            out.append("So min.insync.replicas=2 did not reduce that loss.")
    return out


def rule_quorum_loss(g: pd.DataFrame) -> list[str]:
    q = pool(g, replication_mode="quorum", acks="all", **SAFE)
    i = pool(g, replication_mode="isr", acks="all", min_insync_replicas=1, **SAFE)
    def tail(p: Pooled | None) -> str:
        return f" across {count(p.nemeses, 'nemesis', 'nemeses')}" if p else ""

    return [f"Quorum mode with acks=all {lost(q)}{tail(q)}; ISR with acks=all and "
            f"min.insync.replicas=1 {lost(i)}{tail(i)}."]


def _mode_pair(g: pd.DataFrame, nemesis: str) -> tuple[Pooled | None, Pooled | None]:
    q = pool(g, replication_mode="quorum", acks="all", nemesis=nemesis, **SAFE)
    i = pool(g, replication_mode="isr", acks="all", min_insync_replicas=1, nemesis=nemesis,
             **SAFE)
    return q, i


def rule_minority_side(g: pd.DataFrame) -> list[str]:
    nem = "isolate-partition-leader"
    q, i = _mode_pair(g, nem)
    out = [f"Under {nem}, quorum mode (acks=all) {served(q)}; ISR (acks=all, "
           f"min.insync.replicas=1) {served(i)}."]
    c = _cmp(q.write_availability_fault if q else None, i.write_availability_fault if i else None)
    if c is not None:
        out.append(f"Quorum mode's write availability there was {c} than ISR's"
                   + (" (the equal case: neither refused more)." if c == "equal" else "."))
    return out


def rule_fewer_live(g: pd.DataFrame) -> list[str]:
    nem = "kill-2-of-3"
    q, i = _mode_pair(g, nem)
    out = [f"Under {nem}, ISR (acks=all, min.insync.replicas=1) {served(i)}; quorum mode "
           f"(acks=all) {served(q)}."]
    c = _cmp(i.write_availability_fault if i else None, q.write_availability_fault if q else None)
    if c == "higher":
        out.append("So ISR stayed writable with fewer live replicas than quorum mode needs.")
    elif c is not None:
        out.append(f"ISR was not more writable than quorum mode there ({c}).")
    return out


def rule_unclean(g: pd.DataFrame) -> list[str]:
    faults = sorted(n for n in g["nemesis"].unique() if n != "none")
    base = {"replication_mode": "isr", "acks": "all", "eligible_leader_replicas": False,
            "leader_epoch_enable": True, "nemesis": faults}
    on = pool(g, unclean_leader_election=True, **base)
    off = pool(g, unclean_leader_election=False, **base)

    def both(p: Pooled | None) -> str:
        return f"{lost(p)} and {served(p)}" if p else lost(p)

    out = [f"Over all faults, ISR with acks=all and unclean.leader.election.enable=true "
           f"{both(on)}; with it false, {both(off)}."]
    if on and off:
        more_loss = _cmp(on.lost_per_million, off.lost_per_million) == "higher"
        more_avail = _cmp(on.write_availability_fault, off.write_availability_fault) == "higher"
        out.append("So unclean election traded loss for availability." if more_loss and more_avail
                   else "So unclean election lost more without gaining availability."
                   if more_loss else "So unclean election gained availability without more loss."
                   if more_avail else "Unclean election showed neither more loss nor more "
                   "availability in these runs.")
    return out


def rule_elr(g: pd.DataFrame) -> list[str]:
    nem = "unclean-crash-losing-unflushed-tail"
    base = {"replication_mode": "isr", "acks": "all", "min_insync_replicas": 2,
            "unclean_leader_election": False, "leader_epoch_enable": True, "nemesis": nem}
    on = pool(g, eligible_leader_replicas=True, **base)
    off = pool(g, eligible_leader_replicas=False, **base)
    out = [f"Under {nem}, ISR (acks=all, min.insync.replicas=2) with ELR {lost(on)}; "
           f"without ELR it {lost(off)}."]
    a = on.lost_per_million if on else None
    b = off.lost_per_million if off else None
    if a is not None and b is not None:
        out.append("So ELR avoided the last-replica loss." if b > 0 and a == 0
                   else "So ELR reduced the last-replica loss." if a < b
                   else "Neither lost an acknowledged write there." if a == b == 0
                   else "ELR did not reduce the loss there.")
    return out


def rule_kip101(g: pd.DataFrame) -> list[str]:
    def part(p: Pooled | None, label: str) -> str:
        if p is None:
            return f"with leader.epoch.enable={label}: no data"
        return (f"with leader.epoch.enable={label}, {p.divergent_runs} of {p.runs} ISR runs had "
                f"divergent offsets ({p.divergent_offsets} offsets)")
    off = pool(g, replication_mode="isr", leader_epoch_enable=False)
    on = pool(g, replication_mode="isr", leader_epoch_enable=True)
    text = f"{part(off, 'false')}; {part(on, 'true')}."
    out = [text[0].upper() + text[1:]]
    if off and on and off.runs and on.runs:
        more = off.divergent_runs / off.runs > on.divergent_runs / on.runs
        out.append("So disabling leader epochs shows the KIP-101 divergence." if more
                   else "The runs do not show more divergence without leader epochs.")
    return out


def config_label(row: Any) -> str:
    return (f"{row['replication_mode']} acks={row['acks']} "
            f"min.insync.replicas={row['min_insync_replicas']} "
            f"unclean={str(bool(row['unclean_leader_election'])).lower()} "
            f"ELR={str(bool(row['eligible_leader_replicas'])).lower()} "
            f"RF={row['replication_factor']} "
            f"leader.epoch.enable={str(bool(row['leader_epoch_enable'])).lower()}")


def rule_worst(g: pd.DataFrame) -> list[str]:
    lossy = g[g["lost_writes"].fillna(0) > 0]
    if g["acked_writes"].fillna(0).sum() == 0:
        return ["No run acknowledged a write, so loss cannot be judged."]
    if lossy.empty:
        return ["No configuration lost an acknowledged write under any nemesis."]
    worst = lossy.sort_values(["lost_per_million", "runs"], ascending=[False, False]).iloc[0]
    return [f"{len(lossy)} of {len(g)} configuration-nemesis groups lost acknowledged writes; "
            f"the most was {fmt_pm(worst['lost_per_million'])} per million with "
            f"{config_label(worst)} under {worst['nemesis']} "
            f"({int(worst['fault_duration_ms'])} ms faults)."]


def rule_pairs(pairs: pd.DataFrame) -> list[str]:
    faulted = pairs[pairs["nemesis"] != "none"]
    if faulted.empty:
        return ["No quorum/ISR pairs at equal replication factor and durability setting: "
                "no data for the pairwise comparison."]

    def tally(column: str) -> tuple[int, int, int, int]:
        values = faulted[column]
        known = values.dropna()
        return (int((known < 0).sum()), int((known > 0).sum()), int((known == 0).sum()),
                int(values.isna().sum()))

    a = tally("delta_write_availability_fault")
    lo = tally("delta_lost_per_million")
    return [f"Across {len(faulted)} quorum/ISR pairs under a fault, quorum mode had lower write "
            f"availability during the fault in {a[0]}, higher in {a[1]} and equal in {a[2]} "
            f"({a[3]} not comparable); it lost fewer acknowledged writes per million in "
            f"{lo[0]}, more in {lo[1]} and as many in {lo[2]} ({lo[3]} not comparable)."]


RULES = (rule_min_isr, rule_quorum_loss, rule_minority_side, rule_fewer_live, rule_unclean,
         rule_elr, rule_kip101, rule_worst)


def conclusions(groups: pd.DataFrame, pairs: pd.DataFrame) -> dict[str, list[str]]:
    """Sentences per source (sim, jepsen), in rule order."""
    out: dict[str, list[str]] = {}
    for source in sorted(groups["source"].unique()):
        g = groups[groups["source"] == source]
        sentences = [s for rule in RULES for s in rule(g)]
        sentences += rule_pairs(pairs[pairs["source"] == source])
        out[str(source)] = sentences
    return out
