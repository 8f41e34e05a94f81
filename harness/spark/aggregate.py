"""Aggregating run-summary rows with the Spark DataFrame API (no UDFs, no collect).

Definitions (docs/compare.md, "How to read the report"):
- A second `s` (operations *invoked* in [1000*s, 1000*s + 1000) ms) is **during the fault** when
  fault_start_ms <= 1000*s < heal_ms, and **after heal** when 1000*s >= heal_ms. Runs without a
  fault (nemesis none) have no such seconds; their `*_all` availability is the whole run.
- **Availability** of a group and phase = sum(succeeded) / sum(attempted) over those seconds of
  every run in the group (pooled, so a long run weighs more than a short one); null when nothing
  was attempted.
- A run's **unavailability** = its longest unavailability window (0 if none); p50/p99 are exact
  percentiles (linear interpolation, Spark `percentile`) over the group's runs.
- **Recovery**: p50/max of recovery_time_ms over runs that recovered; `never_recovered` counts
  runs with a heal and no recovery.
- **Loss** = sum(lost_writes) * 1e6 / sum(acked_writes): acknowledged writes lost per million
  acknowledged (null when nothing was acknowledged).
- **Latency** of a group and phase: the median over its runs of each run's p50, p99 and p99.9
  acknowledged-write latency in that phase (before / during / after the fault).
- **Time availability** during the fault: acknowledged open-loop probe slots / probe slots,
  pooled (the probe offers one write per slot whatever is in flight).
- **Visibility lag** during the fault: the median over runs of each run's p99 time from a
  write's acknowledgement to the HW passing it, and the longest such time of any run.
- A run is **anomalous** if it lost a write or has a duplicate, divergent offset, stale or
  non-monotonic read, or a non-linearizable metadata history. The fraction over runs gets a
  95% Wilson score interval (seeds are the independent trials).
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from harness.results.schema import (
    ACKS,
    LATENCY_QUANTILES,
    OPTIONAL_COLUMNS,
    PHASES,
    REPLICATION_MODES,
    SCHEMA,
    SOURCES,
    STUDY_FIELDS,
    SchemaError,
)

# The configuration a row was run with, then the fault it was run under.
CONFIG_KEYS = ("source", "replication_mode", "acks", "min_insync_replicas",
               "unclean_leader_election", "eligible_leader_replicas", "replication_factor",
               "leader_epoch_enable", "flush_policy", "producer", "replica_lag_time_max_ms",
               "broker_session_timeout_ms", "election_timeout_ms")
FAULT_KEYS = ("nemesis", "fault_duration_ms")
GROUP_KEYS = CONFIG_KEYS + FAULT_KEYS
# Quorum and ISR rows are paired when all of these are equal (same RF and durability setting).
# (Each mode at its default durability: the flush policy is not a pairing key; `quorum_vs_isr`
# keeps only the default policies.)
PAIR_KEYS = tuple(k for k in GROUP_KEYS if k not in ("replication_mode", "flush_policy"))
DEFAULT_FLUSH = {"isr": "page-cache", "quorum": "fsync-before-ack"}
WILSON_Z = 1.959963984540054  # two-sided 95%

_PHASES = {
    "fault": "CAST(x.second AS BIGINT) * 1000 >= fault_start_ms "
             "AND CAST(x.second AS BIGINT) * 1000 < heal_ms",
    "heal": "CAST(x.second AS BIGINT) * 1000 >= heal_ms",
    "all": "true",
}
_OPS = {"w": "writes", "r": "reads"}


def check_columns(df: DataFrame) -> None:
    """Raise SchemaError if a column the job needs is missing from the input."""
    missing = [name for name in SCHEMA.names
               if name not in df.columns and name not in OPTIONAL_COLUMNS]
    if missing:
        raise SchemaError(f"input lacks columns {missing} (see docs/compare.md for the schema)")


# Row invariants of harness.results.schema.validate_row that the aggregates rely on, as SQL, for
# datasets written without that validator (e.g. straight from Spark).
def _not_in(column: str, choices: tuple[str, ...]) -> str:
    return f"{column} NOT IN ({', '.join(repr(c) for c in choices)})"


_INVALID = {
    "source": _not_in("source", SOURCES),
    "replication_mode": _not_in("replication_mode", REPLICATION_MODES),
    "acks": _not_in("acks", ACKS),
    "lost_writes > acked_writes": "lost_writes > acked_writes",
    "negative count": "LEAST(acked_writes, lost_writes, duplicates, divergent_offsets, "
                      "stale_reads, nonmonotonic_reads, leader_elections, unclean_elections) < 0",
    "attempted != succeeded + failed + indeterminate": (
        "exists(per_second, x -> x.writes_attempted != x.writes_succeeded + x.writes_failed"
        " + x.writes_indeterminate OR x.reads_attempted != x.reads_succeeded + x.reads_failed"
        " + x.reads_indeterminate)"),
    "fault window/heal partly null": (
        "(fault_start_ms IS NULL) != (heal_ms IS NULL) "
        "OR (fault_end_ms IS NULL) != (heal_ms IS NULL)"),
}


def check_values(df: DataFrame) -> None:
    """Raise SchemaError naming up to 5 runs that break a row invariant (one pass, ids only)."""
    problem = F.lit(None).cast("string")
    for what, predicate in reversed(_INVALID.items()):
        problem = F.when(F.expr(predicate), F.lit(what)).otherwise(problem)
    bad = (df.select("run_id", problem.alias("problem")).filter(F.col("problem").isNotNull())
           .limit(5).collect())
    if bad:
        listed = ", ".join(f"{r['run_id']!r} ({r['problem']})" for r in bad)
        raise SchemaError(f"invalid rows: {listed}")
    # A run counted twice (the same directory given twice, or nested in another input) would
    # weigh double in every pooled number.
    twice = (df.groupBy("run_id").count().filter(F.col("count") > 1).select("run_id")
             .limit(5).collect())
    if twice:
        listed = ", ".join(repr(r["run_id"]) for r in twice)
        raise SchemaError(f"duplicate run_id across the input: {listed}")


def _phase_sum(phase: str, field: str) -> Column:
    # A null predicate (no fault: fault_start_ms/heal_ms null) drops the second, giving 0.
    return F.expr(f"aggregate(filter(per_second, x -> {_PHASES[phase]}), 0L, "
                  f"(acc, x) -> acc + x.{field})")


def fault_duration() -> Column:
    """`fault_duration_ms` as a group key: a simulated row's is exact (the scenario's 1 or 5 s),
    a real run's (source `jepsen`) is a wall-clock measurement (fault applied -> healed, a few
    ms over the schedule's hold), rounded here to whole seconds so that runs of one schedule,
    e.g. `kraftlab compare`'s isr and quorum queue runs, form one cell and pair."""
    exact = F.col("fault_duration_ms")
    rounded = (F.round(exact / F.lit(1000)) * F.lit(1000)).cast("long")
    return F.when(F.col("source") == "jepsen", rounded).otherwise(exact).alias("fault_duration_ms")


def with_optional_columns(df: DataFrame) -> DataFrame:
    """`df` with every optional column (OPTIONAL_COLUMNS), null where the input lacks it."""
    from pyspark.sql.pandas.types import from_arrow_type

    for f in SCHEMA:
        if f.name in OPTIONAL_COLUMNS and f.name not in df.columns:
            df = df.withColumn(f.name, F.lit(None).cast(from_arrow_type(f.type)))
    return df


def run_level(df: DataFrame) -> DataFrame:
    """One row per run with its group keys and the per-run numbers the aggregates pool (and
    the study's optional columns, passed through for the paired comparisons)."""
    check_columns(df)
    df = with_optional_columns(df)
    cols: list[Any] = [fault_duration() if k == "fault_duration_ms" else F.col(k)
                       for k in GROUP_KEYS] + [F.col("seed"), F.col("run_id")]
    for phase in _PHASES:
        for short, op in _OPS.items():
            cols.append(_phase_sum(phase, f"{op}_attempted").alias(f"{short}_att_{phase}"))
            cols.append(_phase_sum(phase, f"{op}_succeeded").alias(f"{short}_ok_{phase}"))
    lengths = "transform(unavailability_windows, w -> w.end_ms - w.start_ms)"
    cols += [
        F.coalesce(F.expr(f"array_max({lengths})"), F.lit(0)).cast("long")
        .alias("max_unavailable_ms"),
        F.expr(f"aggregate({lengths}, 0L, (a, v) -> a + v)").alias("total_unavailable_ms"),
        F.col("recovery_time_ms"),
        (F.col("heal_ms").isNotNull() & F.col("recovery_time_ms").isNull()).cast("int")
        .alias("never_recovered"),
        F.col("acked_writes"), F.col("lost_writes"), F.col("divergent_offsets"),
        ((F.col("lost_writes") > 0) | (F.col("duplicates") > 0)
         | (F.col("divergent_offsets") > 0) | (F.col("stale_reads") > 0)
         | (F.col("nonmonotonic_reads") > 0)
         | F.coalesce(~F.col("metadata_linearizable"), F.lit(False))).cast("int")
        .alias("anomalous"),
        (F.col("divergent_offsets") > 0).cast("int").alias("divergent"),
        F.col("leader_elections"), F.col("unclean_elections"),
        F.col("isr_shrinks"), F.col("isr_expands"),
        (F.col("lost_writes") > 0).cast("int").alias("lossy"),
        *[F.col(f.name) for f in STUDY_FIELDS],
    ]
    return df.select(*cols)


def _ratio(num: str, den: str, scale: float = 1.0) -> Column:
    return F.when(F.col(den) > 0, F.col(num) * F.lit(scale) / F.col(den))


def _wilson(k: str, n: str) -> tuple[Column, Column]:
    """95% Wilson score interval for k successes in n trials (Wilson 1927)."""
    z2 = WILSON_Z * WILSON_Z
    p = F.col(k) / F.col(n)
    nn = F.col(n)
    centre = (p + F.lit(z2) / (2 * nn)) / (1 + F.lit(z2) / nn)
    half = (F.lit(WILSON_Z) * F.sqrt(p * (1 - p) / nn + F.lit(z2) / (4 * nn * nn))
            / (1 + F.lit(z2) / nn))
    # Exactly 0 (1) when k = 0 (k = n): the formula's rounding would print 4e-19.
    low = F.when(F.col(k) == 0, F.lit(0.0)).otherwise(F.greatest(F.lit(0.0), centre - half))
    high = F.when(F.col(k) == F.col(n), F.lit(1.0)).otherwise(F.least(F.lit(1.0), centre + half))
    return low, high


def summarize(runs: DataFrame, keys: tuple[str, ...]) -> DataFrame:
    """The aggregates of `run_level` rows grouped by `keys`, ordered by them."""
    sums = [F.sum(f"{s}_{kind}_{p}").alias(f"{s}_{kind}_{p}")
            for p in _PHASES for s in _OPS for kind in ("att", "ok")]
    agg = runs.groupBy(*keys).agg(
        F.count(F.lit(1)).alias("runs"),
        F.countDistinct("seed").alias("seeds"),
        *sums,
        F.expr("percentile(max_unavailable_ms, 0.5)").alias("p50_unavailable_ms"),
        F.expr("percentile(max_unavailable_ms, 0.99)").alias("p99_unavailable_ms"),
        F.expr("percentile(recovery_time_ms, 0.5)").alias("recovery_p50_ms"),
        F.max("recovery_time_ms").alias("recovery_max_ms"),
        F.sum("never_recovered").alias("never_recovered"),
        F.sum("acked_writes").alias("acked_writes"),
        F.sum("lost_writes").alias("lost_writes"),
        F.sum("anomalous").alias("anomalous_runs"),
        F.sum("lossy").alias("lossy_runs"),
        F.sum("divergent").alias("divergent_runs"),
        F.sum("divergent_offsets").alias("divergent_offsets"),
        F.avg("leader_elections").alias("leader_elections_mean"),
        F.sum("unclean_elections").alias("unclean_elections"),
        F.avg("unclean_elections").alias("unclean_elections_mean"),
        F.avg("isr_shrinks").alias("isr_shrinks_mean"),
        F.avg("isr_expands").alias("isr_expands_mean"),
        # Latency per phase: the median over the group's runs of each run's percentile (the
        # seed is the unit; pooling every write would let the busiest run decide).
        *[F.expr(f"percentile(latency_{q}_ms_{phase}, 0.5)").alias(f"latency_{q}_ms_{phase}")
          for phase in PHASES for q, _ in LATENCY_QUANTILES],
        F.sum(F.coalesce(F.col("probe_slots_during"), F.lit(0))).alias("probe_slots_during"),
        F.sum(F.coalesce(F.col("probe_ok_during"), F.lit(0))).alias("probe_ok_during"),
        # How long records acknowledged during the fault stayed invisible (ack -> HW): the
        # median over runs of each run's p99, and the longest of any run.
        F.expr("percentile(visibility_lag_p99_ms, 0.5)").alias("visibility_lag_p99_ms"),
        F.max("visibility_lag_max_ms").alias("visibility_lag_max_ms"),
    )
    low, high = _wilson("anomalous_runs", "runs")
    loss_low, loss_high = _wilson("lossy_runs", "runs")
    # One withColumns, not a withColumn per column: each of those analyses the whole plan again
    # (about a second per summary on the driver).
    derived = {f"{op[:-1]}_availability_{phase}": _ratio(f"{short}_ok_{phase}",
                                                          f"{short}_att_{phase}")
               for phase in _PHASES for short, op in _OPS.items()}
    derived |= {
        "lost_per_million": _ratio("lost_writes", "acked_writes", 1e6),
        "anomaly_fraction": F.col("anomalous_runs") / F.col("runs"),
        "anomaly_wilson_low": low,
        "anomaly_wilson_high": high,
        "lossy_fraction": F.col("lossy_runs") / F.col("runs"),
        "lossy_wilson_low": loss_low,
        "lossy_wilson_high": loss_high,
        "time_availability_fault": _ratio("probe_ok_during", "probe_slots_during"),
    }
    return agg.withColumns(derived).orderBy(*keys)


DELTA_METRICS = ("write_availability_fault", "read_availability_fault",
                 "write_availability_heal", "p50_unavailable_ms", "recovery_p50_ms",
                 "lost_per_million", "anomaly_fraction", "leader_elections_mean")


def quorum_vs_isr(groups: DataFrame) -> DataFrame:
    """Quorum and ISR aggregates side by side at equal PAIR_KEYS (null-safe: rows that did not
    record a setting pair with each other), each at its default durability (DEFAULT_FLUSH, or
    none recorded); delta_x = quorum - ISR."""
    def side(mode: str) -> DataFrame:
        flush = F.col("flush_policy")
        return groups.filter((F.col("replication_mode") == mode)
                             & (flush.isNull() | (flush == DEFAULT_FLUSH[mode]))).select(
            *[F.col(k).alias(f"{mode}_k_{k}") for k in PAIR_KEYS],
            F.col("runs").alias(f"{mode}_runs"),
            *[F.col(m).alias(f"{mode}_{m}") for m in DELTA_METRICS])

    on = [F.col(f"quorum_k_{k}").eqNullSafe(F.col(f"isr_k_{k}")) for k in PAIR_KEYS]
    joined = side("quorum").join(side("isr"), on=on, how="inner")
    pairs = joined.select(*[F.col(f"quorum_k_{k}").alias(k) for k in PAIR_KEYS],
                          *[c for c in joined.columns if "_k_" not in c])
    pairs = pairs.withColumns({f"delta_{m}": F.col(f"quorum_{m}") - F.col(f"isr_{m}")
                               for m in DELTA_METRICS})
    return pairs.orderBy(*PAIR_KEYS)
