"""Writing the comparison's outputs from the collected aggregates (small pandas frames).

Files in OUT: compare.md (tables + computed conclusion), `<name>.csv` and `<name>.parquet` for
each aggregate table (groups, configs, nemeses, durability, pairs), and three PNG plots
(matplotlib, Agg backend: no display needed). Everything is written on the driver, so on a real
cluster OUT is a path on the machine that runs the driver.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from harness.spark.aggregate import PAIR_KEYS

MAX_MARKDOWN_ROWS = 200  # larger tables stay in their CSV/Parquet files
PLOTS = ("availability_vs_consistency.png", "unavailability_by_nemesis.png",
         "loss_by_durability.png")

_SHORT = {"replication_mode": "mode", "min_insync_replicas": "min.isr",
          "unclean_leader_election": "unclean", "eligible_leader_replicas": "ELR",
          "replication_factor": "RF", "leader_epoch_enable": "epochs",
          "fault_duration_ms": "fault ms", "write_availability_fault": "write avail (fault)",
          "read_availability_fault": "read avail (fault)",
          "write_availability_heal": "write avail (healed)",
          "read_availability_heal": "read avail (healed)",
          "p50_unavailable_ms": "p50 unavail ms", "p99_unavailable_ms": "p99 unavail ms",
          "recovery_p50_ms": "recovery p50 ms", "never_recovered": "never recovered",
          "lost_per_million": "lost/M acked", "anomaly_fraction": "anomalous runs",
          "anomaly_wilson_low": "95% low", "anomaly_wilson_high": "95% high",
          "leader_elections_mean": "elections/run", "unclean_elections": "unclean elections"}

GROUP_COLUMNS = ("source", "replication_mode", "acks", "min_insync_replicas", "unclean_leader_election",
                 "eligible_leader_replicas", "replication_factor", "leader_epoch_enable",
                 "nemesis", "fault_duration_ms", "runs", "write_availability_fault",
                 "read_availability_fault", "write_availability_heal", "read_availability_heal",
                 "p50_unavailable_ms", "p99_unavailable_ms", "recovery_p50_ms",
                 "never_recovered", "lost_per_million", "anomaly_fraction",
                 "anomaly_wilson_low", "anomaly_wilson_high", "leader_elections_mean",
                 "unclean_elections")
PAIR_COLUMNS = PAIR_KEYS + (
    "quorum_runs", "isr_runs", "delta_write_availability_fault", "delta_read_availability_fault",
    "delta_write_availability_heal", "delta_p50_unavailable_ms", "delta_lost_per_million",
    "delta_anomaly_fraction")


def _cell(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        if value.is_integer():
            return str(int(value))
        return f"{value:.1f}" if abs(value) >= 100 else f"{value:.4g}"
    return str(value)


def markdown_table(frame: pd.DataFrame, columns: Sequence[str]) -> list[str]:
    cols = [c for c in columns if c in frame.columns]
    head = [("Δ " if c.startswith("delta_") else "") + _SHORT.get(c.removeprefix("delta_"), c)
            for c in cols]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(cols)]
    for record in frame[cols].to_dict("records"):
        lines.append("| " + " | ".join(_cell(record[c]) for c in cols) + " |")
    return lines


def write_tables(out: Path, tables: dict[str, pd.DataFrame]) -> list[Path]:
    written = []
    for name, frame in tables.items():
        csv, parquet = out / f"{name}.csv", out / f"{name}.parquet"
        frame.to_csv(csv, index=False)
        frame.to_parquet(parquet, index=False)
        written += [csv, parquet]
    return written


def _series_label(row: Any) -> str:
    return f"{row['source']}/{row['replication_mode']}"


def config_short(row: Any, with_rf: bool = False) -> str:
    """A configuration in a few characters, for plot labels: `isr all/1 U`, `quorum all/2`
    (acks/min.insync.replicas; U unclean election, ELR, E- leader epochs off, J jepsen)."""
    parts = [f"{row['replication_mode']} {row['acks']}/{row['min_insync_replicas']}"]
    if bool(row["unclean_leader_election"]):
        parts.append("U")
    if bool(row["eligible_leader_replicas"]):
        parts.append("ELR")
    if not bool(row["leader_epoch_enable"]):
        parts.append("E-")
    if with_rf:
        parts.append(f"RF{row['replication_factor']}")
    if row["source"] != "sim":
        parts.append(str(row["source"])[0].upper())
    return " ".join(parts)


def point_labels(configs: pd.DataFrame) -> list[tuple[str, float, float, int]]:
    """(label, x, y, line) for every configuration on the availability-vs-consistency plot:
    x = write availability during faults, y = anomalous-run fraction, and `line` > 0 lifts a
    label that would overlap one already placed nearby (labels are about a tenth of the axes
    wide) by that many lines instead of printing it over the other."""
    if configs.empty:
        return []
    with_rf = configs["replication_factor"].nunique() > 1
    xs = configs["write_availability_fault"].astype(float)
    ys = configs["anomaly_fraction"].astype(float)
    x_span = max(float(xs.max() - xs.min()), 0.05)
    y_span = max(float(ys.max() - ys.min()), 0.05)
    placed: list[tuple[float, float]] = []  # label positions, in spans
    out = []
    for _, row in configs.sort_values(["write_availability_fault", "anomaly_fraction"]).iterrows():
        x, y = float(row["write_availability_fault"]), float(row["anomaly_fraction"])
        k = 0
        while any(abs(x / x_span - px) < 0.15 and abs(y / y_span + 0.045 * k - py) < 0.04
                  for px, py in placed):
            k += 1
        placed.append((x / x_span, y / y_span + 0.045 * k))
        out.append((config_short(row, with_rf), x, y, k))
    return out


def write_plots(out: Path, tables: dict[str, pd.DataFrame]) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = [out / name for name in PLOTS]
    configs = tables["configs"].dropna(subset=["write_availability_fault"])
    fig, ax = plt.subplots(figsize=(8, 5))
    for label, part in configs.groupby(configs.apply(_series_label, axis=1)):
        ax.scatter(part["write_availability_fault"], part["anomaly_fraction"], label=label)
        ax.vlines(part["write_availability_fault"], part["anomaly_wilson_low"],
                  part["anomaly_wilson_high"], alpha=0.3)
    for label, x, y, k in point_labels(configs):
        ax.annotate(label, (x, y), xytext=(5, 4 + 9 * k), textcoords="offset points",
                    fontsize=7)
    ax.set(xlabel="write availability during faults", ylabel="fraction of runs with an anomaly",
           title="Availability vs consistency, one point per configuration (95% Wilson)")
    ax.text(0.0, -0.13, "labels: mode acks/min.insync.replicas; U unclean election, ELR, "
            "E- leader epochs off, J jepsen", transform=ax.transAxes, fontsize=7)
    ax.legend() if len(configs) else ax.text(0.5, 0.5, "no data", ha="center")
    fig.tight_layout()
    fig.savefig(paths[0], dpi=100)
    plt.close(fig)

    _grouped_bars(paths[1], tables["nemeses"], "nemesis", "p50_unavailable_ms",
                  "p99_unavailable_ms", "ms",
                  "Longest unavailability window per run, by nemesis (bar p50, tick p99)")
    durability = tables["durability"].assign(
        setting=lambda f: "acks=" + f["acks"].astype(str) + "\nmin.isr="
        + f["min_insync_replicas"].astype(str))
    _grouped_bars(paths[2], durability, "setting", "lost_per_million", None,
                  "lost per million acknowledged",
                  "Acknowledged writes lost, by acks and min.insync.replicas (all nemeses)")
    return paths


def _grouped_bars(path: Path, frame: pd.DataFrame, category: str, value: str,
                  tick: str | None, ylabel: str, title: str) -> None:
    import matplotlib.pyplot as plt

    frame = frame.assign(series=frame.apply(_series_label, axis=1) if len(frame) else [])
    cats = sorted(frame[category].unique()) if len(frame) else []
    series = sorted(frame["series"].unique()) if len(frame) else []
    width = 0.8 / max(1, len(series))
    fig, ax = plt.subplots(figsize=(max(6, 0.9 * len(cats) + 2), 5))
    for k, name in enumerate(series):
        part = frame[frame["series"] == name].set_index(category)
        xs = [i + k * width for i in range(len(cats))]
        ys = [float(part[value].get(c, float("nan"))) if c in part.index else float("nan")
              for c in cats]
        bars = ax.bar(xs, [0 if math.isnan(y) else y for y in ys], width, label=name)
        ax.bar_label(bars, labels=["n/a" if math.isnan(y) else f"{y:.0f}" for y in ys],
                     fontsize=7)
        if tick:
            ticks = [float(part[tick].get(c)) if c in part.index else float("nan") for c in cats]
            ax.scatter(xs, ticks, marker="_", color="black", s=200)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(cats))], cats, rotation=30,
                  ha="right", fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    if series:
        ax.legend()
    else:
        ax.text(0.5, 0.5, "no data", ha="center", transform=ax.transAxes)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _bounded(title: str, frame: pd.DataFrame, columns: Sequence[str], csv: str) -> list[str]:
    """A table in full up to MAX_MARKDOWN_ROWS rows, else a pointer to its CSV."""
    lines = [f"## {title}", ""]
    if frame.empty:
        return lines + ["no data", ""]
    if len(frame) > MAX_MARKDOWN_ROWS:
        return lines + [f"{len(frame)} rows: see `{csv}` (and the `.parquet` beside it).", ""]
    return lines + markdown_table(frame, columns) + [""]


def write_markdown(out: Path, tables: dict[str, pd.DataFrame],
                   sentences: dict[str, list[str]], meta: dict[str, Any],
                   verdicts: Sequence[str] = (), findings: Sequence[str] = (),
                   finding_tables: Sequence[tuple[str, pd.DataFrame]] = ()) -> Path:
    groups, pairs = tables["groups"], tables["pairs"]
    lines = ["# kraftlab: quorum vs ISR under faults", "",
             f"Input {meta['input']}: {meta['runs']} runs ({meta['sources']}), "
             f"{len(groups)} configuration-nemesis groups, {len(pairs)} quorum/ISR pairs. "
             f"Spark master `{meta['master']}`. Definitions: docs/compare.md; the study with "
             f"its plots, evidence and reproductions: [report.html](report.html).", ""]
    if verdicts:
        lines += ["## Verdicts (equal safety first; paired by seed, see report.html for the "
                  "rules and margins)", "", *verdicts, ""]
    if findings:
        lines += ["## The twelve reference scenarios", "", *[f"- {f}" for f in findings], ""]
    for title, frame in finding_tables:
        lines += [f"Evidence of {title}:", "", *markdown_table(frame, list(frame.columns)), ""]
    lines += ["## Conclusion", "",
             "Each sentence below is generated from the aggregates by a rule "
             "(harness/spark/conclude.py); \"no data\" means the input has no such runs.", ""]
    for source, said in sentences.items():
        lines += [f"### {source}", ""] + [f"- {s}" for s in said] + [""]
    for source in sorted(groups["source"].unique()):
        configs = tables["configs"][tables["configs"]["source"] == source]
        nemeses = tables["nemeses"][tables["nemeses"]["source"] == source]
        lines += [f"## Per configuration, all nemeses pooled ({source})", ""]
        lines += markdown_table(configs, GROUP_COLUMNS) + [""]
        lines += [f"## Per nemesis and replication mode ({source})", ""]
        lines += markdown_table(nemeses, GROUP_COLUMNS) + [""]
        lines += _bounded(f"Per configuration and nemesis ({source})",
                          groups[groups["source"] == source], GROUP_COLUMNS, "groups.csv")
        lines += _bounded(f"Quorum minus ISR at equal RF and durability ({source})",
                          pairs[pairs["source"] == source], PAIR_COLUMNS, "pairs.csv")
    lines += ["## Plots", ""] + [f"![{p}]({p})" for p in PLOTS] + [""]
    path = out / "compare.md"
    path.write_text("\n".join(lines))
    return path
