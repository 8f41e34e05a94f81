"""Pairing runs of two arms by seed (Spark), and the per-cell tables built from the pairs.

`paired_runs(runs)` joins, for every comparison of harness/spark/arms.py, the runs of arm `a`
with the runs of arm `b` that share PAIR_KEYS: the source, replication factor, nemesis, fault
duration and seed, and the settings that are not the arm (client, replica.lag.time.max.ms,
broker.session.timeout.ms; null-safe, so rows that did not record them pair with each other).
The same seed means the same fault schedule, victims and client timings in both arms. Only the
pairs (one row per comparison, cell and seed, a few numbers each) come back to the driver.

`comparison_table(pairs)` is the per-cell statistics (harness/spark/stats.py: paired mean
difference, bootstrap interval, verdict); `safety_table(pairs)` the per-cell loss of each arm
with its Wilson interval and the seeds that reproduce a loss; `cell_facts(pairs)` what each
arm's runs of a cell did (ISR shrinks, elections, losses, unavailable time, recovery), from which
harness/spark/verdicts.py words the mechanism of a decisive cell.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import reduce
from typing import Any

import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from harness.spark.arms import ARMS, COMPARISONS, Arm, Comparison
from harness.spark.stats import METRICS, MIN_SEEDS, Safety, paired_cells, safety_verdict

PAIR_KEYS = ("source", "replication_factor", "nemesis", "fault_duration_ms", "seed", "producer",
             "replica_lag_time_max_ms", "broker_session_timeout_ms")
CELL_KEYS = tuple(k for k in PAIR_KEYS if k != "seed")
# The per-run numbers each side carries (stats.METRICS columns, then loss and provenance).
RUN_COLUMNS = tuple(m.column for m in METRICS) + ("acked_writes", "lost_writes", "run_id",
                                                  "replay_command", "leader_elections",
                                                  "unclean_elections", "isr_shrinks")


def run_metrics(runs: DataFrame) -> DataFrame:
    """The per-run metrics of `aggregate.run_level` rows (stats.METRICS columns)."""
    probe_lost = F.col("probe_slots_during") - F.col("probe_ok_during")
    return runs.select(
        "*",
        F.when(F.col("w_att_fault") > 0, F.col("w_ok_fault") / F.col("w_att_fault"))
        .alias("avail_fault"),
        (probe_lost * F.col("probe_interval_ms")).cast("double").alias("unavail_ms_during"),
        F.col("latency_p99_ms_during").alias("p99_ms_during"),
        F.col("latency_p99_ms_before").alias("p99_ms_before"),
        F.col("recovery_time_ms").cast("double").alias("recovery_ms"),
    )


def arm_filter(arm: Arm) -> Column:
    conditions = [F.col(k) == F.lit(v) for k, v in arm.settings.items()]
    if arm.flush_policies:
        known = [p for p in arm.flush_policies if p is not None]
        flush = F.col("flush_policy").isin(known) if known else F.lit(False)
        if None in arm.flush_policies:
            flush = flush | F.col("flush_policy").isNull()
        conditions.append(flush)
    return reduce(lambda x, y: x & y, conditions, F.lit(True))


def paired_runs(runs: DataFrame, comparisons: Sequence[Comparison] = COMPARISONS,
                arms: dict[str, Arm] | None = None) -> DataFrame:
    """One row per comparison, cell and seed where both arms ran (see the module docstring).

    One join pairs every comparison: each run is tagged with the (comparison, side) places its
    arm filters give it (exploded, so a run in several comparisons appears once per place), and
    side `a` meets side `b` on the comparison and PAIR_KEYS. A join per comparison, unioned,
    gave the same rows with eleven joins' stages in the plan; this one shuffles once."""
    arms = arms or ARMS
    if not comparisons:
        raise ValueError("no comparisons")
    # A run with a set raft election timeout belongs to that trade-off curve only: the raft
    # arm's own runs draw theirs per seed, and no other arm has the setting to pair it with.
    metrics = run_metrics(runs).filter((F.col("nemesis") != "none")
                                       & F.col("election_timeout_ms").isNull())
    places = [F.when(arm_filter(arms[arm]), F.struct(F.lit(i).alias("c"), F.lit(side).alias("side")))
              for i, c in enumerate(comparisons) for side, arm in (("a", c.a), ("b", c.b))]
    tagged = metrics.select(
        "*", F.explode(F.filter(F.array(*places), lambda t: t.isNotNull())).alias("place"))

    def side(name: str) -> DataFrame:
        return tagged.filter(F.col("place.side") == name).select(
            F.col("place.c").alias(f"{name}k_c"),
            *[F.col(k).alias(f"{name}k_{k}") for k in PAIR_KEYS],
            *[F.col(c).alias(f"{name}_{c}") for c in RUN_COLUMNS])

    a, b = side("a"), side("b")
    on = reduce(lambda x, y: x & y,
                [F.col(f"ak_{k}").eqNullSafe(F.col(f"bk_{k}")) for k in PAIR_KEYS],
                F.col("ak_c") == F.col("bk_c"))

    def per_comparison(values: list[str]) -> Column:
        return F.element_at(F.array(*map(F.lit, values)), F.col("ak_c") + 1)

    return a.join(b, on=on, how="inner").select(
        per_comparison([c.key for c in comparisons]).alias("comparison"),
        per_comparison([c.kind for c in comparisons]).alias("kind"),
        per_comparison([c.a for c in comparisons]).alias("arm_a"),
        per_comparison([c.b for c in comparisons]).alias("arm_b"),
        *[F.col(f"ak_{k}").alias(k) for k in PAIR_KEYS],
        *[F.col(f"{p}_{col}") for p in ("a", "b") for col in RUN_COLUMNS])


def comparison_table(pairs: pd.DataFrame, min_seeds: int = MIN_SEEDS) -> pd.DataFrame:
    """Per comparison, cell and metric: the paired statistics (stats.paired_cells), with the
    comparison's kind and arms."""
    table = paired_cells(pairs, CELL_KEYS, METRICS, min_seeds)
    if table.empty:
        return table
    info = pairs[["comparison", "kind", "arm_a", "arm_b"]].drop_duplicates()
    return table.merge(info, on="comparison", how="left")


def _seeds(part: pd.DataFrame, side: str) -> tuple[int, ...]:
    lossy = part[part[f"{side}_lost_writes"].fillna(0) > 0]
    return tuple(sorted(int(s) for s in lossy["seed"]))


def safety_table(pairs: pd.DataFrame) -> pd.DataFrame:
    """Per comparison and cell: each arm's runs, runs with a lost acknowledged write, its 95%
    Wilson interval, the seeds that lost (reproductions), and stats.safety_verdict."""
    rows: list[dict[str, Any]] = []
    if pairs.empty:
        return pd.DataFrame(columns=["comparison", *CELL_KEYS, "verdict"])
    keys = ["comparison", "kind", "arm_a", "arm_b", *CELL_KEYS]
    for cell, part in pairs.groupby(keys, dropna=False, sort=True):
        row = dict(zip(keys, cell, strict=True))
        sides = {}
        for side in ("a", "b"):
            seeds = _seeds(part, side)
            s = Safety(runs=len(part), lossy_runs=len(seeds), lossy_seeds=seeds)
            low, high = s.interval
            first = part[part["seed"] == seeds[0]].iloc[0] if seeds else None
            row |= {f"{side}_runs": s.runs, f"{side}_lossy_runs": s.lossy_runs,
                    f"{side}_lossy_low": low, f"{side}_lossy_high": high,
                    f"{side}_lost_writes": int(part[f"{side}_lost_writes"].fillna(0).sum()),
                    f"{side}_acked_writes": int(part[f"{side}_acked_writes"].fillna(0).sum()),
                    f"{side}_lossy_seeds": ",".join(map(str, seeds)),
                    f"{side}_repro_run": None if first is None else first[f"{side}_run_id"],
                    f"{side}_repro_command": None if first is None
                    else first[f"{side}_replay_command"]}
            sides[side] = s
        row["verdict"] = safety_verdict(sides["a"], sides["b"])
        rows.append(row)
    return pd.DataFrame(rows)


# cell_facts' columns per side (a_<name>, b_<name>).
FACT_COLUMNS = ("runs", "shrink_runs", "election_runs", "elections", "unclean_elections",
                "lossy_runs", "lost_writes", "unavail_ms_during", "avail_fault", "recovery_ms")


def _side_facts(part: pd.DataFrame, side: str) -> dict[str, Any]:
    def col(name: str) -> pd.Series:
        column = f"{side}_{name}"
        return (pd.to_numeric(part[column], errors="coerce") if column in part
                else pd.Series([float("nan")] * len(part), index=part.index))

    def mean(name: str) -> float | None:
        values = col(name).dropna()
        return float(values.mean()) if len(values) else None

    recovery = col("recovery_ms").dropna()
    return {"runs": len(part),
            "shrink_runs": int((col("isr_shrinks").fillna(0) > 0).sum()),
            "election_runs": int((col("leader_elections").fillna(0) > 0).sum()),
            "elections": int(col("leader_elections").fillna(0).sum()),
            "unclean_elections": int(col("unclean_elections").fillna(0).sum()),
            "lossy_runs": int((col("lost_writes").fillna(0) > 0).sum()),
            "lost_writes": int(col("lost_writes").fillna(0).sum()),
            "unavail_ms_during": mean("unavail_ms_during"),
            "avail_fault": mean("avail_fault"),
            "recovery_ms": float(recovery.median()) if len(recovery) else None}


def cell_facts(pairs: pd.DataFrame) -> pd.DataFrame:
    """Per comparison and cell, what each arm's paired runs did (FACT_COLUMNS as a_*, b_*):
    runs, runs whose ISR shrank, runs with a leader election, elections and unclean ones,
    runs that lost acknowledged writes and how many, the mean unavailable time and write
    availability during the fault, the median recovery after the heal."""
    keys = ["comparison", *CELL_KEYS]
    if pairs.empty:
        return pd.DataFrame(columns=[*keys, *(f"{s}_{c}" for s in "ab" for c in FACT_COLUMNS)])
    rows = []
    for cell, part in pairs.groupby(keys, dropna=False, sort=True):
        row = dict(zip(keys, cell, strict=True))
        for side in ("a", "b"):
            row |= {f"{side}_{k}": v for k, v in _side_facts(part, side).items()}
        rows.append(row)
    return pd.DataFrame(rows)
