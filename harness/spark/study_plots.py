"""The study's plots (matplotlib, Agg): per comparison a forest plot of the paired differences by
fault; the trade-off curves (availability in time and runs with a loss against a swept setting,
per arm); the cost of durability (acknowledged-write latency per phase, per arm).

Rows of the aggregate tables are assigned to arms by harness/spark/arms.py (`arm_of`); a curve
holds the other swept settings at the study's defaults (DEFAULTS).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from harness.spark.arms import ARMS
from harness.spark.stats import METRIC_BY_COLUMN, wilson

COLOURS = {"b-better": "#1a9850", "a-better": "#d73027", "equivalent": "#777777",
           "inconclusive": "#fdae61", "insufficient": "#cccccc"}
ARM_COLOURS = {"isr-min2": "#d95f02", "isr-min2-elr": "#e6ab02", "isr-min2-flush": "#a6761d",
               "quorum": "#1b9e77", "quorum-nofsync": "#66a61e", "raft": "#7570b3",
               "isr-min1": "#e7298a", "isr-min1-unclean": "#e31a1c", "isr-acks1": "#999999",
               "isr min ISR 2": "#d95f02", "isr min ISR 3": "#a6761d"}
# A curve keeps the other settings at these (None: not set, e.g. the election timeout drawn
# per seed).
DEFAULTS: dict[str, int | None] = {"replica_lag_time_max_ms": 2000,
                                   "broker_session_timeout_ms": 1000, "fault_duration_ms": 5000,
                                   "replication_factor": 3, "election_timeout_ms": None}
# (file, title, the swept column, its label, the nemeses drawn)
CURVES = (
    ("curve_lag.png", "replica.lag.time.max.ms", "replica_lag_time_max_ms", "ms",
     ("follower-gc-pauses", "isolate-partition-leader")),
    ("curve_session.png", "broker.session.timeout.ms", "broker_session_timeout_ms", "ms",
     ("kill-leader", "follower-gc-pauses")),
    ("curve_duration.png", "fault duration", "fault_duration_ms", "ms",
     ("isolate-partition-leader", "kill-leader")),
    ("curve_rf.png", "replication factor / min.insync.replicas", "rf_min_isr", "",
     ("kill-leader", "kill-2-of-3", "isolate-partition-leader")),
    ("curve_election.png", "raft election timeout", "election_timeout_ms", "ms",
     ("kill-leader", "flapping", "pause-leader")),
)
LATENCY_PLOT = "latency_by_arm.png"


def arm_of(row: Any) -> str | None:
    """The arm a row of an aggregate table ran (None: none of ARMS)."""
    values = {k: (None if isinstance(v, float) and math.isnan(v) else v)
              for k, v in dict(row).items()}
    for key, arm in ARMS.items():
        if arm.matches(values):
            return key
    return None


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def forest(path: Path, evidence: pd.DataFrame, metric: str, a_label: str, b_label: str) -> Path:
    """One row per fault: the mean paired difference b - a and its 95% interval."""
    plt = _plt()
    m = METRIC_BY_COLUMN[metric]
    rows = evidence.dropna(subset=["diff"]) if "diff" in evidence else evidence.iloc[0:0]
    scale = 100.0 if m.unit == "fraction" else 1.0
    unit = "pp" if m.unit == "fraction" else m.unit
    fig, ax = plt.subplots(figsize=(8, 0.34 * max(len(rows), 3) + 1.6))
    for i, (_, r) in enumerate(rows.iloc[::-1].iterrows()):
        colour = COLOURS.get(str(r["verdict"]), "#333333")
        ax.errorbar(scale * r["diff"], i, xerr=[[scale * (r["diff"] - r["diff_low"])],
                                                [scale * (r["diff_high"] - r["diff"])]],
                    fmt="o", color=colour, capsize=3)
    ax.axvspan(-scale * m.margin, scale * m.margin, color="#eeeeee", zorder=0)
    ax.axvline(0, color="#999999", linewidth=0.8)
    ax.set_yticks(range(len(rows)), list(rows["nemesis"].iloc[::-1]), fontsize=8)
    better = "lower" if not m.higher_is_better else "higher"
    ax.set_xlabel(f"{b_label} minus {a_label}: {m.label} ({unit}; {better} is better)",
                  fontsize=8)
    ax.set_title(f"{b_label} - {a_label}, paired by seed: mean and 95% bootstrap interval\n"
                 f"(grey band: within +-{scale * m.margin:g} {unit}, no difference)", fontsize=9)
    if rows.empty:
        ax.text(0.5, 0.5, "no paired data", ha="center", transform=ax.transAxes)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _curve_rows(groups: pd.DataFrame, column: str, nemeses: Sequence[str]) -> pd.DataFrame:
    g = groups[(groups["source"] == "sim") & groups["nemesis"].isin(nemeses)].copy()
    if g.empty:
        return g
    g["arm"] = [arm_of(r) for _, r in g.iterrows()]
    g = g[g["arm"].isin(["isr-min2", "quorum", "raft"])
          | ((column == "rf_min_isr") & g["replication_mode"].eq("isr"))]
    for other, default in DEFAULTS.items():
        if other != column and other in g.columns and not (
                column == "rf_min_isr" and other == "replication_factor"):
            g = g[g[other].isna() | (g[other] == default)]
    if column in g.columns:
        g = g[g[column].notna()]  # the election timeout: only the runs that set it
    if column == "rf_min_isr":
        g = g[g["acks"].eq("all") & g["flush_policy"].isin(["page-cache", "fsync-before-ack"])
              & ~g["unclean_leader_election"].astype(bool)
              & ~g["eligible_leader_replicas"].astype(bool)
              & g["leader_epoch_enable"].astype(bool)
              & (g["replication_mode"].ne("isr") | g["min_insync_replicas"].isin([2, 3]))]
        g["arm"] = [f"{r['replication_mode']}" + (f" min ISR {r['min_insync_replicas']}"
                                                   if r["replication_mode"] == "isr" else "")
                    for _, r in g.iterrows()]
        g["rf_min_isr"] = g["replication_factor"]
    return g


def curve(path: Path, groups: pd.DataFrame, title: str, column: str, unit: str,
          nemeses: Sequence[str]) -> Path:
    """Availability in time during the fault, and the runs with a loss, against `column`."""
    plt = _plt()
    g = _curve_rows(groups, column, nemeses)
    fig, axes = plt.subplots(2, len(nemeses), figsize=(4.2 * len(nemeses), 6.2), sharex="col",
                             squeeze=False)
    for j, nemesis in enumerate(nemeses):
        part = g[g["nemesis"] == nemesis] if not g.empty else g
        top, bottom = axes[0][j], axes[1][j]
        for arm, rows in (part.groupby("arm") if not part.empty else []):
            rows = rows.sort_values(column)
            xs = rows[column].astype(float)
            slots = rows["probe_slots_during"].astype(float)
            avail = rows["probe_ok_during"].astype(float) / slots.where(slots > 0)
            colour = ARM_COLOURS.get(str(arm))
            top.plot(xs, avail, marker="o", label=str(arm), color=colour)
            lows, highs, fracs = [], [], []
            for _, r in rows.iterrows():
                k, n = int(r["lossy_runs"]), int(r["runs"])
                low, high = wilson(k, n)
                fracs.append(k / n if n else math.nan)
                lows.append(k / n - low if n else 0)
                highs.append(high - k / n if n else 0)
            bottom.errorbar(xs, fracs, yerr=[lows, highs], marker="s", capsize=3,
                            color=colour, label=str(arm))
        top.set_title(nemesis, fontsize=9)
        top.set_ylim(-0.02, 1.02)
        bottom.set_ylim(-0.02, 1.02)
        bottom.set_xlabel(f"{title}" + (f" ({unit})" if unit else ""), fontsize=8)
        if not part.empty:
            values = sorted(set(part[column].astype(float)))
            if column != "rf_min_isr" and min(values) > 0:
                top.set_xscale("log")
            for ax in (top, bottom):
                ax.set_xticks(values, [f"{v:g}" for v in values], fontsize=7)
                ax.minorticks_off()
        if j == 0:
            top.set_ylabel("availability in time\n(probe slots acknowledged)", fontsize=8)
            bottom.set_ylabel("runs that lost an\nacknowledged write (95% Wilson)", fontsize=8)
        if part.empty:
            top.text(0.5, 0.5, "no data", ha="center", transform=top.transAxes)
        else:
            top.legend(fontsize=7)
    fig.suptitle(f"Trade-off: {title}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def latency(path: Path, configs: pd.DataFrame) -> Path:
    """p50 / p99 / p99.9 acknowledged-write latency per arm, before and during faults (the
    median over runs of each run's percentile, all faults of the arm pooled)."""
    plt = _plt()
    g = configs[configs["source"] == "sim"].copy() if not configs.empty else configs
    if not g.empty:
        g["arm"] = [arm_of(r) for _, r in g.iterrows()]
        for other, default in DEFAULTS.items():
            if other in g.columns and other != "fault_duration_ms":
                g = g[g[other].isna() | (g[other] == default)]
        g = g[g["arm"].notna()]
    arms = [a for a in ARMS if not g.empty and a in set(g["arm"])]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for ax, phase in zip(axes, ("before", "during"), strict=True):
        width = 0.26
        for k, q in enumerate(("p50", "p99", "p999")):
            ys = [float(g[g["arm"] == a][f"latency_{q}_ms_{phase}"].median()) for a in arms]
            bars = ax.bar([i + k * width for i in range(len(arms))], ys, width,
                          label=q.replace("p999", "p99.9"))
            ax.bar_label(bars, labels=[f"{y:.0f}" if not math.isnan(y) else "" for y in ys],
                         fontsize=6)
        ax.set_xticks([i + width for i in range(len(arms))], arms, rotation=25, ha="right",
                      fontsize=8)
        if any(b.get_height() > 0 for b in ax.patches):
            ax.set_yscale("log")
        ax.set_title(f"{phase} the fault", fontsize=9)
        if not arms:
            ax.text(0.5, 0.5, "no latency recorded", ha="center", transform=ax.transAxes)
    axes[0].set_ylabel("acknowledged-write latency (ms)")
    if arms:
        axes[0].legend(fontsize=8)
    fig.suptitle("The cost of durability: latency of acknowledged writes per arm", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def write_study_plots(out: Path, groups: pd.DataFrame, configs: pd.DataFrame) -> list[Path]:
    paths = [curve(out / name, groups, title, column, unit, nemeses)
             for name, title, column, unit, nemeses in CURVES]
    paths.append(latency(out / LATENCY_PLOT, configs))
    return paths
