"""The report's conclusion: every sentence is produced by a rule over the aggregates.

Input is the per-group aggregate table (aggregate.summarize over GROUP_KEYS, collected as a
pandas DataFrame: at most a few thousand rows) and the quorum-vs-ISR pairs. A rule selects the
groups it talks about, pools their *sums* (never averages of ratios) and states what the numbers
show; a subject without rows is reported as "no data", never guessed. The rules follow the
literature claims (a) to (f) of docs/compare.md (KIP-101, KIP-966, Kafka's design docs): each
states the pooled numbers, then a verdict line, "Reproduced: <claim>." or "Not reproduced:
<claim> (<why, from the numbers>).", decided by comparing the pooled numbers only.

Invariants a verdict relies on (a claim the data cannot speak to is "Not reproduced: <claim>
(insufficient data: ...)", never "Reproduced"):
- A comparison of two settings pools only the cells (every group key except the varied
  setting: the other durability settings, replication factor, nemesis and fault duration) run
  on both sides, so a difference comes from the setting, not from which faults each side saw.
- Loss and availability claims leave out nemesis `none`: a run without a fault shows nothing
  about behaviour under one.
- Each side needs `Evidence.min_runs` runs and `Evidence.min_acked` acknowledged writes (loss
  claims) or `Evidence.min_attempted` writes attempted during the fault (availability claims).
"""

from __future__ import annotations

from collections.abc import Sequence
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


@dataclass(frozen=True, slots=True)
class Evidence:
    """The least data per side of a claim before a verdict may say "Reproduced". The defaults
    suit the matrix (20 runs per cell); the hand-computed test fixture passes smaller ones."""

    min_runs: int = 5
    min_acked: int = 100  # acknowledged writes, for loss claims
    min_attempted: int = 100  # writes attempted during the fault, for availability claims


DEFAULT_EVIDENCE = Evidence()

# Every group key but `source` (conclusions() splits by source first): what makes a "cell".
CELL_KEYS = ("replication_mode", "acks", "min_insync_replicas", "unclean_leader_election",
             "eligible_leader_replicas", "replication_factor", "leader_epoch_enable", "nemesis",
             "fault_duration_ms", "flush_policy", "producer", "replica_lag_time_max_ms",
             "broker_session_timeout_ms", "election_timeout_ms")


def select(groups: pd.DataFrame, **match: Any) -> pd.DataFrame:
    """The groups whose columns equal `match` (a list value means any of them)."""
    sel = groups
    for column, value in match.items():
        if isinstance(value, list | tuple):
            sel = sel[sel[column].isin(value)]
        else:
            sel = sel[sel[column] == value]
    return sel


def faulted(groups: pd.DataFrame) -> pd.DataFrame:
    return groups[groups["nemesis"] != "none"]


# Each mode's own durability: ISR on the page cache (Kafka's default), quorum and raft with an
# fsync before an append counts; null for rows written before the policy was recorded. The
# variants (flush.messages=1, quorum without its fsync) are compared in the paired study.
DEFAULT_FLUSH = ("page-cache", "fsync-before-ack")


def default_durability(groups: pd.DataFrame) -> pd.DataFrame:
    """The rows that ran their mode's default flush policy (DEFAULT_FLUSH, or none recorded)."""
    if "flush_policy" not in groups.columns:
        return groups
    policy = groups["flush_policy"]
    return groups[policy.isna() | policy.isin(DEFAULT_FLUSH)]


def matched(a: pd.DataFrame, b: pd.DataFrame,
            vary: Sequence[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The rows of `a` and of `b` whose cell (CELL_KEYS minus `vary`) occurs on both sides."""
    keys = [k for k in CELL_KEYS if k not in vary and k in a.columns and k in b.columns]
    common = a[keys].drop_duplicates().merge(b[keys].drop_duplicates(), on=keys)
    return a.merge(common, on=keys), b.merge(common, on=keys)


def shortfall(p: Pooled, name: str, ev: Evidence, *, acked: bool = False,
              attempted: bool = False) -> str | None:
    """Why `p` is too little data for a verdict, or None when it is enough."""
    short = []
    if p.runs < ev.min_runs:
        short.append(f"{count(p.runs, 'run')} (needs {ev.min_runs})")
    if acked and p.acked < ev.min_acked:
        short.append(f"{count(p.acked, 'acknowledged write')} (needs {ev.min_acked})")
    if attempted and p.w_att_fault < ev.min_attempted:
        short.append(f"{count(p.w_att_fault, 'write')} attempted during the fault "
                     f"(needs {ev.min_attempted})")
    return f"{name} has " + " and ".join(short) if short else None


def insufficient(*reasons: str | None) -> str | None:
    found = [r for r in reasons if r]
    return "insufficient data: " + "; ".join(found) if found else None


def pool_frame(sel: pd.DataFrame) -> Pooled | None:
    """Pool every row of `sel` (None when it is empty)."""
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


def pool(groups: pd.DataFrame, **match: Any) -> Pooled | None:
    """Pool the groups whose columns equal `match` (a list value means any of them)."""
    return pool_frame(select(groups, **match))


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


# Faults in which the leader is first cut off from its followers (longer than
# replica.lag.time.max.ms, so the ISR can shrink to the leader) and then loses leadership:
# killed, or cut from the controller too (Kafka docs: Availability and Durability Guarantees).
LOSES_LEADERSHIP = ("cut-followers-then-kill-leader", "isolate-partition-leader")
LAST_REPLICA = "unclean-crash-losing-unflushed-tail"  # KIP-966's "last replica standing"
MINORITY = "leader-cut-from-followers-only"  # the leader alone on the minority side


def verdict(ok: bool, claim: str, why: str = "") -> str:
    """'Reproduced: claim.' or 'Not reproduced: claim (why).'."""
    if ok:
        return f"Reproduced: {claim}."
    return f"Not reproduced: {claim}" + (f" ({why})." if why else ".")


def _nemeses_with_loss(g: pd.DataFrame, **match: Any) -> list[str]:
    sel = g
    for column, value in match.items():
        sel = sel[sel[column].isin(value)] if isinstance(value, list | tuple) else \
            sel[sel[column] == value]
    return sorted(sel[sel["lost_writes"].fillna(0) > 0]["nemesis"].unique())


def _nem_list(names: Sequence[str]) -> str:
    return ", ".join(names)


def no_cells(a_name: str, b_name: str) -> str:
    return (f"insufficient data: no cell (same other settings, replication factor, nemesis and "
            f"fault duration) was run with both {a_name} and {b_name}")


def pair_gap(a_rows: pd.DataFrame, b_rows: pd.DataFrame, a: Pooled | None, b: Pooled | None,
             names: tuple[str, str], cells: tuple[str, str], ev: Evidence, *,
             acked: bool = False, attempted: bool = False) -> str | None:  # fmt: skip
    """Why two arms give no verdict: no rows for one ("no data"), no cell run with both
    (`cells` name them), or too little data in one (`names`); None when they can be compared."""
    if a_rows.empty or b_rows.empty:
        return "no data"
    if a is None or b is None:
        return no_cells(*cells)
    return insufficient(shortfall(a, names[0], ev, acked=acked, attempted=attempted),
                        shortfall(b, names[1], ev, acked=acked, attempted=attempted))  # fmt: skip


def rule_min_isr(g: pd.DataFrame, ev: Evidence = DEFAULT_EVIDENCE) -> list[str]:
    """(a) ISR, acks=all, min ISR 1 vs 2, when the cut-off leader loses leadership to an
    out-of-sync follower (unclean election allowed), then when it loses its disk tail."""
    base = dict(SAFE, replication_mode="isr", acks="all", unclean_leader_election=True,
                nemesis=list(LOSES_LEADERSHIP))
    one_rows = select(g, min_insync_replicas=1, **base)
    two_rows = select(g, min_insync_replicas=2, **base)
    one_m, two_m = matched(one_rows, two_rows, ("min_insync_replicas",))
    one, two = pool_frame(one_m), pool_frame(two_m)
    out = [f"When the ISR leader was cut off from its followers and then lost leadership to an "
           f"out-of-sync follower ({_nem_list(LOSES_LEADERSHIP)}, unclean election allowed), "
           f"acks=all with min.insync.replicas=1 {lost(one)}; with min.insync.replicas=2 it "
           f"{lost(two)}."]
    claim = ("ISR with acks=all and min.insync.replicas=1 loses acknowledged writes when the "
             "leader is cut off from its followers and then loses leadership; with "
             "min.insync.replicas=2 it loses none")
    names = ("min.insync.replicas=1", "min.insync.replicas=2")
    if why := pair_gap(one_rows, two_rows, one, two, names, names, ev, acked=True):
        out.append(verdict(False, claim, why))
    else:
        assert one is not None and two is not None
        why = ("min.insync.replicas=1 lost none" if one.lost == 0 else
               "min.insync.replicas=2 lost some too")
        out.append(verdict(one.lost > 0 and two.lost == 0, claim, why))
    crash = dict(SAFE, replication_mode="isr", acks="all", nemesis=LAST_REPLICA)
    c1, c2 = pool(g, min_insync_replicas=1, **crash), pool(g, min_insync_replicas=2, **crash)
    if c1 is not None or c2 is not None:
        tail = ""
        if c2 is not None and c2.lost_per_million is not None:
            tail = (": with the leader's disk tail gone, min.insync.replicas=2 alone did not "
                    "prevent the loss (KIP-966: that needs ELR)"
                    if c2.lost_per_million > 0 else
                    ": min.insync.replicas=2 prevented that loss too")
        out.append(f"When the cut-off leader instead crashed losing its unflushed tail "
                   f"({LAST_REPLICA}, no unclean election), min.insync.replicas=1 {lost(c1)}; "
                   f"min.insync.replicas=2 without ELR {lost(c2)}{tail}.")
    return out


def rule_quorum_loss(g: pd.DataFrame, ev: Evidence = DEFAULT_EVIDENCE) -> list[str]:
    """(b) quorum mode (acks=all) loses nothing, under any fault (nemesis `none` left out), at
    its default durability (an fsync before an append counts)."""
    fg = default_durability(faulted(g))
    q = pool(fg, replication_mode="quorum", acks="all", **SAFE)
    i = pool(fg, replication_mode="isr", acks="all", min_insync_replicas=1, **SAFE)

    def tail(p: Pooled | None) -> str:
        return f" across {count(p.nemeses, 'nemesis', 'nemeses')}" if p else ""

    out = [f"Quorum mode with acks=all {lost(q)}{tail(q)}; ISR with acks=all and "
           f"min.insync.replicas=1 {lost(i)}{tail(i)}."]
    claim = "quorum mode with acks=all loses no acknowledged write"
    if q is None:
        out.append(verdict(False, claim, "no data" if select(
            g, replication_mode="quorum", acks="all", **SAFE).empty else
            "insufficient data: quorum mode was run only without a fault"))
    elif q.lost > 0:
        where = _nemeses_with_loss(fg, replication_mode="quorum", acks="all", **SAFE)
        out.append(verdict(False, claim, f"it lost writes under {_nem_list(where)}"))
    elif (why := insufficient(shortfall(q, "quorum mode", ev, acked=True))):
        out.append(verdict(False, claim, why))
    else:
        out.append(verdict(True, claim))
    return out


def _mode_pair(g: pd.DataFrame, nemesis: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Quorum (any min ISR) and ISR (min ISR 1) rows, acks=all, under `nemesis`, restricted to
    the cells both modes ran (same replication factor, durability settings, fault duration)."""
    g = default_durability(g)
    q = select(g, replication_mode="quorum", acks="all", nemesis=nemesis, **SAFE)
    i = select(g, replication_mode="isr", acks="all", min_insync_replicas=1, nemesis=nemesis,
               **SAFE)
    return matched(q, i, ("replication_mode", "min_insync_replicas", "flush_policy"))


def rule_minority_side(g: pd.DataFrame, ev: Evidence = DEFAULT_EVIDENCE) -> list[str]:
    """(b) quorum mode stops accepting writes on a minority side: under MINORITY the leader
    (still the controller's choice) is alone, a minority of its replicas. The claim is about
    quorum mode alone; ISR at the same cells is shown beside it."""
    q_rows = select(default_durability(g), replication_mode="quorum", acks="all",
                    nemesis=MINORITY, **SAFE)
    _, i_m = _mode_pair(g, MINORITY)
    q, i = pool_frame(q_rows), pool_frame(i_m)
    out = [f"Under {MINORITY} (the leader alone on the minority side of its replicas, still "
           f"named leader by the controller), quorum mode (acks=all) {served(q)}; ISR "
           f"(acks=all, min.insync.replicas=1) {served(i)}."]
    claim = "quorum mode stops accepting writes on a minority side"
    if q is None:
        out.append(verdict(False, claim, "no data"))
    elif q.w_ok_fault > 0:
        out.append(verdict(False, claim, f"it acknowledged {q.w_ok_fault} writes there"))
    elif (why := insufficient(shortfall(q, "quorum mode", ev, attempted=True))):
        out.append(verdict(False, claim, why))
    else:
        out.append(verdict(True, claim))
    return out


def rule_fewer_live(g: pd.DataFrame, ev: Evidence = DEFAULT_EVIDENCE) -> list[str]:
    """(c) ISR stays writable with fewer live replicas than quorum mode needs (same RF)."""
    nem = "kill-2-of-3"
    q_m, i_m = _mode_pair(g, nem)
    q, i = pool_frame(q_m), pool_frame(i_m)
    out = [f"Under {nem}, ISR (acks=all, min.insync.replicas=1) {served(i)}; quorum mode "
           f"(acks=all) {served(q)}."]
    claim = "ISR mode stays writable with fewer live replicas than quorum mode needs"
    if q is None or i is None:
        any_q = not select(g, replication_mode="quorum", nemesis=nem).empty
        any_i = not select(g, replication_mode="isr", nemesis=nem).empty
        out.append(verdict(False, claim, no_cells("ISR", "quorum mode") if any_q and any_i
                           else "no data"))
        return out
    if (why := insufficient(shortfall(i, "ISR", ev, attempted=True),
                            shortfall(q, "quorum mode", ev, attempted=True))):
        out.append(verdict(False, claim, why))
        return out
    c = _cmp(i.write_availability_fault, q.write_availability_fault)
    out.append(verdict(c == "higher", claim, f"ISR's write availability was {c}, not higher"))
    return out


def rule_unclean(g: pd.DataFrame, ev: Evidence = DEFAULT_EVIDENCE) -> list[str]:
    """(d) unclean election trades loss for availability: ISR acks=all min ISR 1, unclean on
    vs off, over every fault cell run with both settings."""
    base = {"replication_mode": "isr", "acks": "all", "min_insync_replicas": 1,
            "eligible_leader_replicas": False, "leader_epoch_enable": True}
    fg = faulted(g)
    on_rows = select(fg, unclean_leader_election=True, **base)
    off_rows = select(fg, unclean_leader_election=False, **base)
    on_m, off_m = matched(on_rows, off_rows, ("unclean_leader_election",))
    on, off = pool_frame(on_m), pool_frame(off_m)

    def both(p: Pooled | None) -> str:
        return f"{lost(p)} and {served(p)}" if p else lost(p)

    where = f" ({count(on.nemeses, 'nemesis', 'nemeses')})" if on else ""
    out = [f"Over the faults run with both settings{where}, ISR with acks=all, "
           f"min.insync.replicas=1 and unclean.leader.election.enable=true {both(on)}; with it "
           f"false, {both(off)}."]
    claim = "unclean election trades loss for availability"
    if why := pair_gap(on_rows, off_rows, on, off, ("unclean on", "unclean off"),
                       ("unclean election on", "off"), ev, acked=True, attempted=True):  # fmt: skip
        out.append(verdict(False, claim, why))
        return out
    assert on is not None and off is not None
    more_loss = _cmp(on.lost_per_million, off.lost_per_million) == "higher"
    more_avail = _cmp(on.write_availability_fault, off.write_availability_fault) == "higher"
    why = ("it lost more without gaining availability" if more_loss else
           "it gained availability without more loss" if more_avail else
           "neither more loss nor more availability")
    out.append(verdict(more_loss and more_avail, claim, why))
    return out


def rule_elr(g: pd.DataFrame, ev: Evidence = DEFAULT_EVIDENCE) -> list[str]:
    """(e) ELR avoids the last-replica loss (KIP-966)."""
    base = {"replication_mode": "isr", "acks": "all", "min_insync_replicas": 2,
            "unclean_leader_election": False, "leader_epoch_enable": True,
            "nemesis": LAST_REPLICA}
    on_rows = select(g, eligible_leader_replicas=True, **base)
    off_rows = select(g, eligible_leader_replicas=False, **base)
    on_m, off_m = matched(on_rows, off_rows, ("eligible_leader_replicas",))
    on, off = pool_frame(on_m), pool_frame(off_m)
    out = [f"Under {LAST_REPLICA}, ISR (acks=all, min.insync.replicas=2) with ELR {lost(on)}; "
           f"without ELR it {lost(off)}."]
    claim = "ELR avoids loss in the last-replica case"
    if why := pair_gap(on_rows, off_rows, on, off, ("ELR", "no ELR"), ("ELR", "without it"), ev,
                       acked=True):  # fmt: skip
        out.append(verdict(False, claim, why))
    else:
        assert on is not None and off is not None
        why = ("without ELR nothing was lost either" if off.lost == 0 else
               "ELR reduced the loss but did not avoid it" if
               _cmp(on.lost_per_million, off.lost_per_million) == "lower" else
               "ELR did not reduce the loss")
        out.append(verdict(on.lost == 0 and off.lost > 0, claim, why))
    return out


_EPOCH_PAIR_KEYS = tuple(k for k in CELL_KEYS if k != "leader_epoch_enable")


def rule_kip101(g: pd.DataFrame, ev: Evidence = DEFAULT_EVIDENCE) -> list[str]:
    """(f) leader.epoch.enable=false shows the KIP-101 divergence (replicas disagreeing below
    their HWs at the end of a run), compared with the same settings and faults with epochs on;
    and no run with epochs on may diverge at all."""
    off_groups = g[~g["leader_epoch_enable"].astype(bool)]
    on_groups = g[g["leader_epoch_enable"].astype(bool)]
    out: list[str] = []
    claim = "leader.epoch.enable=false shows the KIP-101 divergence"
    off_m, on_m = matched(off_groups, on_groups, ("leader_epoch_enable",))
    off, on = pool_frame(off_m), pool_frame(on_m)
    if off is None or on is None:
        out.append("No runs with leader.epoch.enable=false and a counterpart with it true: "
                   "no data for the KIP-101 comparison.")
        out.append(verdict(False, claim, "no data"))
    else:
        out.append(f"With leader.epoch.enable=false, {off.divergent_runs} of {off.runs} runs "
                   f"ended with replicas disagreeing below their high watermarks "
                   f"({off.divergent_offsets} offsets); the same settings and faults with it "
                   f"true: {on.divergent_runs} of {on.runs} ({on.divergent_offsets} offsets).")
        why = insufficient(shortfall(off, "leader.epoch.enable=false", ev),
                           shortfall(on, "leader.epoch.enable=true", ev))
        if why is None:
            why = ("no run diverged without epochs" if off.divergent_runs == 0 else
                   "runs diverged with epochs on too")
            out.append(verdict(off.divergent_runs > 0 and on.divergent_runs == 0, claim, why))
        else:
            out.append(verdict(False, claim, why))
    every = pool_frame(on_groups)
    if every is not None:
        where = sorted(on_groups[on_groups["divergent_runs"].fillna(0) > 0]["nemesis"].unique())
        out.append(f"Across every run with leader epochs on (both modes), "
                   f"{every.divergent_runs} of {every.runs} ended divergent"
                   + (f" (under {_nem_list(where)}: epoch-based truncation should rule this "
                      f"out, so it is a finding)." if every.divergent_runs else "."))
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


VERDICT_RULES = (rule_min_isr, rule_quorum_loss, rule_minority_side, rule_fewer_live,
                 rule_unclean, rule_elr, rule_kip101)


NO_DATA = "(no data)."


def with_data(said: list[str], source: str) -> list[str]:
    """A rule's sentences, unless the source is not the simulator and the rule found no rows
    at all (its verdict ends "(no data)."): a handful of real runs (`kraftlab compare`'s live
    queue runs) speaks only to the claims its cells match, instead of a page of "no data"."""
    if source != "sim" and any(s.endswith(NO_DATA) for s in said):
        return []
    return said


def conclusions(groups: pd.DataFrame, pairs: pd.DataFrame,
                evidence: Evidence = DEFAULT_EVIDENCE) -> dict[str, list[str]]:
    """Sentences per source (sim, jepsen), in rule order."""
    out: dict[str, list[str]] = {}
    for source in sorted(groups["source"].unique()):
        g = groups[groups["source"] == source]
        sentences = [s for rule in VERDICT_RULES for s in with_data(rule(g, evidence), source)]
        sentences += rule_worst(g)
        sentences += rule_pairs(pairs[pairs["source"] == source])
        out[str(source)] = sentences
    return out
