"""The run-summary row: one row per scenario run, shared by the simulator matrix, Jepsen runs
and the Spark comparison job (docs/compare.md documents every column).

Producers (`kraftlab sim matrix`, `kraftlab jepsen run --out`) build `RunSummary` values and
write them with `write_dataset(rows, out_dir, part=...)` (one Parquet file per worker or slice,
`part-<name>.parquet`); the Spark job (harness/spark) reads the directory as one dataset.
`read_dataset(dir)` reads it back without Spark and validates every row.

Invariants (checked by `validate_row`, so a bad producer fails at write time, not in the report):
- `source` is sim|jepsen, `replication_mode` isr|quorum, `acks` "0"|"1"|"all".
- counts are >= 0; `lost_writes <= acked_writes` (a lost write is an acknowledged one, Jepsen's
  lost-write); per second, `attempted == succeeded + failed + indeterminate` (every invoked
  operation is bucketed by its invoke second, info counts as indeterminate, never as failed).
- intervals have `start_ms <= end_ms`; the fault window and heal are all null (nemesis `none`)
  or all set with `fault_start_ms <= fault_end_ms <= heal_ms`; `recovery_time_ms` is null when
  there is no heal, and null after a heal means "never recovered".
- the optional columns of the study (OPTIONAL_COLUMNS: files written before them read back with
  null) are null or valid: a flush policy and producer of their lists, positive timeouts,
  latency percentiles p50 <= p99 <= p99.9 within a phase, and probe slots with
  `0 <= ok <= slots` and an interval when any slot is counted.
All times are integer ms from the start of the run's workload, on the run's own clock (simulated
for `sim`, wall for `jepsen`).

Phases of a run (latency and probe columns): `before` = [workload start, fault_start_ms),
`during` = [fault_start_ms, heal_ms), `after` = [heal_ms, workload end), by invoke time; a run
without a fault has only `before` (its whole workload).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

SCHEMA_VERSION = 1
SOURCES = ("sim", "jepsen")
# The arms of the comparison (docs/replication.md): Kafka's ISR, majority commit over the ISR
# protocol (quorum), and a Raft group per partition (raft). An arm is a value, not a column.
REPLICATION_MODES = ("isr", "quorum", "raft")
ACKS = ("0", "1", "all")
# The matrix's nemesis names. Jepsen runs map their fault names onto these; other
# kebab-case names are accepted so new shapes need no schema change.
NEMESES = (
    "none", "isolate-partition-leader", "leader-cut-from-followers-only", "zombie-leader",
    "random-halves", "majorities-ring", "bridge", "isolate-controller-leader",
    "metadata-quorum-down", "kill-leader", "pause-leader", "kill-2-of-3",
    "unclean-crash-losing-unflushed-tail", "flapping", "cut-followers-then-kill-leader",
)
_NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
# When a write is durable (docs/compare.md, "Fair arms"): Kafka's default, the page cache with
# replication as durability (`page-cache`); `flush.messages=1` (`flush-every-message`, an fsync
# per append before the leader counts it); quorum/raft fsync before a replica counts toward the
# majority (`fsync-before-ack`, what their correctness needs), or, as an unsafe variant, not at
# all (`no-fsync`).
FLUSH_POLICIES = ("page-cache", "flush-every-message", "fsync-before-ack", "no-fsync")
# The write client: `kafka` (retries within delivery.timeout.ms, idempotence, request.timeout.ms;
# Kafka's producer defaults scaled like the run's timeouts) or `simple` (one attempt, no retry,
# the matrix's first client).
PRODUCERS = ("kafka", "simple")
PHASES = ("before", "during", "after")
LATENCY_QUANTILES = (("p50", 0.5), ("p99", 0.99), ("p999", 0.999))


class SchemaError(ValueError):
    """A row or dataset does not follow the run-summary schema (says which run and column)."""


@dataclass(frozen=True, slots=True)
class NemesisEvent:
    start_ms: int
    end_ms: int
    kind: str  # e.g. partition, kill, pause, restart, crash-unflushed


@dataclass(frozen=True, slots=True)
class Window:
    start_ms: int
    end_ms: int


@dataclass(frozen=True, slots=True)
class SecondCounts:
    """Operations invoked during second `second` ([1000*second, 1000*second + 1000) ms)."""

    second: int
    writes_attempted: int = 0
    writes_succeeded: int = 0
    writes_failed: int = 0
    writes_indeterminate: int = 0
    reads_attempted: int = 0
    reads_succeeded: int = 0
    reads_failed: int = 0
    reads_indeterminate: int = 0


@dataclass(frozen=True, slots=True)
class RunSummary:
    run_id: str
    source: str
    seed: int
    replication_mode: str
    acks: str
    min_insync_replicas: int
    unclean_leader_election: bool
    eligible_leader_replicas: bool
    leader_epoch_enable: bool
    replication_factor: int
    brokers: int
    nemesis: str
    fault_duration_ms: int
    duration_ms: int
    wall_duration_ms: int
    nemesis_timeline: tuple[NemesisEvent, ...] = ()
    per_second: tuple[SecondCounts, ...] = ()
    unavailability_windows: tuple[Window, ...] = ()
    fault_start_ms: int | None = None
    fault_end_ms: int | None = None
    heal_ms: int | None = None
    acked_writes: int = 0
    lost_writes: int = 0
    duplicates: int = 0
    divergent_offsets: int = 0
    stale_reads: int = 0
    nonmonotonic_reads: int = 0
    metadata_linearizable: bool | None = None
    recovery_time_ms: int | None = None
    leader_elections: int = 0
    unclean_elections: int = 0
    isr_shrinks: int = 0
    isr_expands: int = 0
    # The metadata side of the run: "raft" (a Raft quorum of controller voters: `sim` rows of
    # `kraftlab sim matrix` by default, 3 simulated voters), "abstract" (the simulator's single
    # controller whose proposals commit after a fixed delay), null when not recorded. Optional:
    # files written before it existed read back with null (OPTIONAL_COLUMNS).
    metadata_quorum: str | None = None
    # -- the study's columns (all optional: OPTIONAL_COLUMNS) --------------------------------
    # Settings beyond the arm (trade-off curves) and the durability and client of the run.
    flush_policy: str | None = None
    producer: str | None = None
    replica_lag_time_max_ms: int | None = None
    broker_session_timeout_ms: int | None = None
    election_timeout_ms: int | None = None  # raft partitions' election timeout
    # Acknowledged-write latency (invoke -> ack, retries included) per phase: count and
    # percentiles in ms (null: no acknowledged write in that phase).
    acked_before: int | None = None
    latency_p50_ms_before: float | None = None
    latency_p99_ms_before: float | None = None
    latency_p999_ms_before: float | None = None
    acked_during: int | None = None
    latency_p50_ms_during: float | None = None
    latency_p99_ms_during: float | None = None
    latency_p999_ms_during: float | None = None
    acked_after: int | None = None
    latency_p50_ms_after: float | None = None
    latency_p99_ms_after: float | None = None
    latency_p999_ms_after: float | None = None
    # Availability in time: an open-loop probe invokes one write every probe_interval_ms
    # whatever is in flight; a slot is ok when its write was acknowledged (within the
    # producer's delivery timeout). Unavailable time in a phase = (slots - ok) * interval.
    probe_interval_ms: int | None = None
    probe_slots_before: int | None = None
    probe_ok_before: int | None = None
    probe_slots_during: int | None = None
    probe_ok_during: int | None = None
    probe_slots_after: int | None = None
    probe_ok_after: int | None = None
    # The one command that replays this run (the simulator's, with its seed and settings).
    replay_command: str | None = None
    schema_version: int = field(default=SCHEMA_VERSION)

    def to_record(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> RunSummary:
        values = dict(record)
        values["nemesis_timeline"] = tuple(NemesisEvent(**e) for e in values["nemesis_timeline"])
        values["per_second"] = tuple(SecondCounts(**s) for s in values["per_second"])
        values["unavailability_windows"] = tuple(
            Window(**w) for w in values["unavailability_windows"]
        )
        return cls(**{f.name: values[f.name] for f in fields(cls)})


def _i64(name: str, nullable: bool = False) -> pa.Field:
    return pa.field(name, pa.int64(), nullable=nullable)


_SECOND = pa.struct([pa.field("second", pa.int32(), nullable=False)] + [
    _i64(f"{kind}_{what}") for kind in ("writes", "reads")
    for what in ("attempted", "succeeded", "failed", "indeterminate")
])
_EVENT = pa.struct([_i64("start_ms"), _i64("end_ms"), pa.field("kind", pa.string(), False)])
_WINDOW = pa.struct([_i64("start_ms"), _i64("end_ms")])
STUDY_FIELDS = (
    pa.field("flush_policy", pa.string(), nullable=True),
    pa.field("producer", pa.string(), nullable=True),
    _i64("replica_lag_time_max_ms", True),
    _i64("broker_session_timeout_ms", True),
    _i64("election_timeout_ms", True),
    *[f for phase in PHASES for f in (
        _i64(f"acked_{phase}", True),
        *[pa.field(f"latency_{q}_ms_{phase}", pa.float64(), nullable=True)
          for q, _ in LATENCY_QUANTILES])],
    _i64("probe_interval_ms", True),
    *[f for phase in PHASES for f in (_i64(f"probe_slots_{phase}", True),
                                      _i64(f"probe_ok_{phase}", True))],
    pa.field("replay_command", pa.string(), nullable=True),
)

SCHEMA = pa.schema([
    pa.field("run_id", pa.string(), nullable=False),
    pa.field("source", pa.string(), nullable=False),
    _i64("seed"),
    pa.field("replication_mode", pa.string(), nullable=False),
    pa.field("acks", pa.string(), nullable=False),
    pa.field("min_insync_replicas", pa.int32(), nullable=False),
    pa.field("unclean_leader_election", pa.bool_(), nullable=False),
    pa.field("eligible_leader_replicas", pa.bool_(), nullable=False),
    pa.field("leader_epoch_enable", pa.bool_(), nullable=False),
    pa.field("replication_factor", pa.int32(), nullable=False),
    pa.field("brokers", pa.int32(), nullable=False),
    pa.field("nemesis", pa.string(), nullable=False),
    _i64("fault_duration_ms"),
    _i64("duration_ms"),
    _i64("wall_duration_ms"),
    pa.field("nemesis_timeline", pa.list_(_EVENT), nullable=False),
    pa.field("per_second", pa.list_(_SECOND), nullable=False),
    pa.field("unavailability_windows", pa.list_(_WINDOW), nullable=False),
    _i64("fault_start_ms", True),
    _i64("fault_end_ms", True),
    _i64("heal_ms", True),
    _i64("acked_writes"),
    _i64("lost_writes"),
    _i64("duplicates"),
    _i64("divergent_offsets"),
    _i64("stale_reads"),
    _i64("nonmonotonic_reads"),
    pa.field("metadata_linearizable", pa.bool_(), nullable=True),
    _i64("recovery_time_ms", True),
    _i64("leader_elections"),
    _i64("unclean_elections"),
    _i64("isr_shrinks"),
    _i64("isr_expands"),
    pa.field("metadata_quorum", pa.string(), nullable=True),
    *STUDY_FIELDS,
    pa.field("schema_version", pa.int32(), nullable=False),
])
# Columns added after schema version 1 was first written: a file without them reads as null.
OPTIONAL_COLUMNS = ("metadata_quorum", *(f.name for f in STUDY_FIELDS))
METADATA_QUORUMS = ("raft", "abstract")
assert SCHEMA.names == [f.name for f in fields(RunSummary)], "schema and dataclass drifted"

_COUNTS = ("seed", "fault_duration_ms", "duration_ms", "wall_duration_ms", "acked_writes",
           "lost_writes", "duplicates", "divergent_offsets", "stale_reads", "nonmonotonic_reads",
           "leader_elections", "unclean_elections", "isr_shrinks", "isr_expands")


def _fail(row: RunSummary, message: str) -> SchemaError:
    return SchemaError(f"run {row.run_id!r}: {message}")


def _check_choices(row: RunSummary) -> None:
    for name, choices in (("source", SOURCES), ("replication_mode", REPLICATION_MODES),
                          ("acks", ACKS)):
        if getattr(row, name) not in choices:
            raise _fail(row, f"{name}={getattr(row, name)!r}, expected one of {choices}")
    if not row.run_id:
        raise SchemaError("run_id is empty")
    if not _NAME.match(row.nemesis):
        raise _fail(row, f"nemesis={row.nemesis!r} is not a kebab-case name")
    if row.replication_factor < 1 or row.brokers < row.replication_factor:
        raise _fail(row, f"replication_factor={row.replication_factor} with "
                         f"brokers={row.brokers}")
    if not 1 <= row.min_insync_replicas <= row.replication_factor:
        raise _fail(row, f"min_insync_replicas={row.min_insync_replicas} outside "
                         f"[1, replication_factor={row.replication_factor}]")
    if row.metadata_quorum is not None and row.metadata_quorum not in METADATA_QUORUMS:
        raise _fail(row, f"metadata_quorum={row.metadata_quorum!r}, expected one of "
                         f"{METADATA_QUORUMS} or null")
    for name, choices in (("flush_policy", FLUSH_POLICIES), ("producer", PRODUCERS)):
        value = getattr(row, name)
        if value is not None and value not in choices:
            raise _fail(row, f"{name}={value!r}, expected one of {choices} or null")
    if row.schema_version != SCHEMA_VERSION:
        raise _fail(row, f"schema_version={row.schema_version}, this reader knows "
                         f"{SCHEMA_VERSION}")


def _check_counts(row: RunSummary) -> None:
    for name in _COUNTS:
        if getattr(row, name) < 0:
            raise _fail(row, f"{name}={getattr(row, name)} is negative")
    if row.lost_writes > row.acked_writes:
        raise _fail(row, f"lost_writes={row.lost_writes} > acked_writes={row.acked_writes}")
    if row.unclean_elections > row.leader_elections:
        raise _fail(row, "unclean_elections > leader_elections")
    seconds = [s.second for s in row.per_second]
    if seconds != sorted(set(seconds)) or (seconds and seconds[0] < 0):
        raise _fail(row, "per_second seconds must be >= 0, strictly increasing")
    for s in row.per_second:
        for kind in ("writes", "reads"):
            parts = [getattr(s, f"{kind}_{w}") for w in ("succeeded", "failed", "indeterminate")]
            attempted = getattr(s, f"{kind}_attempted")
            if min(parts) < 0 or attempted != sum(parts):
                raise _fail(row, f"second {s.second}: {kind}_attempted={attempted} != "
                                 f"succeeded+failed+indeterminate={sum(parts)}")


def _check_times(row: RunSummary) -> None:
    for what, spans in (("nemesis_timeline", row.nemesis_timeline),
                        ("unavailability_windows", row.unavailability_windows)):
        for span in spans:
            if not 0 <= span.start_ms <= span.end_ms:
                raise _fail(row, f"{what}: start_ms={span.start_ms} end_ms={span.end_ms}")
    window = (row.fault_start_ms, row.fault_end_ms, row.heal_ms)
    if all(t is None for t in window):
        if row.recovery_time_ms is not None:
            raise _fail(row, "recovery_time_ms set without a heal (heal_ms is null)")
        return
    if any(t is None for t in window):
        raise _fail(row, f"fault_start_ms/fault_end_ms/heal_ms must be all set or all null: "
                         f"{window}")
    assert row.fault_start_ms is not None and row.fault_end_ms is not None
    assert row.heal_ms is not None
    if not 0 <= row.fault_start_ms <= row.fault_end_ms <= row.heal_ms:
        raise _fail(row, f"need 0 <= fault_start_ms <= fault_end_ms <= heal_ms, got {window}")
    if row.recovery_time_ms is not None and row.recovery_time_ms < 0:
        raise _fail(row, f"recovery_time_ms={row.recovery_time_ms} is negative")


def _check_study(row: RunSummary) -> None:
    for name in ("replica_lag_time_max_ms", "broker_session_timeout_ms", "election_timeout_ms",
                 "probe_interval_ms"):
        value = getattr(row, name)
        if value is not None and value <= 0:
            raise _fail(row, f"{name}={value} must be positive")
    for phase in PHASES:
        acked = getattr(row, f"acked_{phase}")
        if acked is not None and acked < 0:
            raise _fail(row, f"acked_{phase}={acked} is negative")
        values = [getattr(row, f"latency_{q}_ms_{phase}") for q, _ in LATENCY_QUANTILES]
        known = [v for v in values if v is not None]
        if known and (min(known) < 0 or known != sorted(known)):
            raise _fail(row, f"latency percentiles of phase {phase} must be >= 0 and "
                             f"p50 <= p99 <= p99.9: {values}")
        slots, ok = getattr(row, f"probe_slots_{phase}"), getattr(row, f"probe_ok_{phase}")
        if (slots is None) != (ok is None):
            raise _fail(row, f"probe_slots_{phase} and probe_ok_{phase}: both or neither")
        if slots is not None and ok is not None:
            if not 0 <= ok <= slots:
                raise _fail(row, f"probe_ok_{phase}={ok} outside [0, {slots}]")
            if slots and row.probe_interval_ms is None:
                raise _fail(row, f"probe_slots_{phase}={slots} without probe_interval_ms")


def validate_row(row: RunSummary) -> None:
    """Raise SchemaError naming the run and the column if `row` breaks an invariant."""
    _check_choices(row)
    _check_counts(row)
    _check_times(row)
    _check_study(row)


def to_table(rows: Iterable[RunSummary]) -> pa.Table:
    """Validated rows as an Arrow table with SCHEMA."""
    records = []
    for row in rows:
        validate_row(row)
        records.append(row.to_record())
    return pa.Table.from_pylist(records, schema=SCHEMA)


def write_dataset(rows: Sequence[RunSummary], out_dir: Path | str, part: str = "0") -> Path:
    """Write `rows` as `out_dir/part-<part>.parquet` (one file per worker or slice).

    The file is written under a temporary name and renamed, so a reader never sees half a file.
    Run ids must be unique within the file; uniqueness across files is checked by the reader.
    """
    if not re.match(r"^[A-Za-z0-9_.-]+$", part):
        raise SchemaError(f"part name {part!r}: use letters, digits, '-', '_', '.'")
    ids = [r.run_id for r in rows]
    if len(ids) != len(set(ids)):
        raise SchemaError("duplicate run_id within one part")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    final = out / f"part-{part}.parquet"
    tmp = out / f".part-{part}.parquet.tmp"
    pq.write_table(to_table(rows), tmp)
    tmp.replace(final)
    return final


def _same_type(actual: pa.DataType, expected: pa.DataType) -> bool:
    """Equal up to list item names and nullability (Spark writes `element`, nullable fields)."""
    if pa.types.is_list(expected) or pa.types.is_large_list(expected):
        return ((pa.types.is_list(actual) or pa.types.is_large_list(actual))
                and _same_type(actual.value_type, expected.value_type))
    if pa.types.is_struct(expected):
        return (pa.types.is_struct(actual)
                and [f.name for f in actual] == [f.name for f in expected]
                and all(_same_type(a.type, e.type) for a, e in zip(actual, expected, strict=True)))
    return bool(actual.equals(expected))


def check_schema(schema: pa.Schema) -> None:
    """Raise SchemaError if `schema` lacks a column of SCHEMA or has it with another type."""
    for expected in SCHEMA:
        if expected.name not in schema.names and expected.name in OPTIONAL_COLUMNS:
            continue
        if expected.name not in schema.names:
            raise SchemaError(f"column {expected.name!r} is missing")
        actual = schema.field(expected.name).type
        if not _same_type(actual, expected.type):
            raise SchemaError(f"column {expected.name!r} has type {actual}, "
                              f"expected {expected.type}")


def _check_nulls(array: pa.Array, field: pa.Field, path: str) -> None:
    """Nulls only where SCHEMA allows them, nested fields included (a writer such as Spark may
    declare every field nullable)."""
    if not field.nullable and array.null_count:
        raise SchemaError(f"column {path!r} has {array.null_count} null values")
    if pa.types.is_list(field.type):
        _check_nulls(array.flatten(), field.type.value_field, f"{path}[]")
    elif pa.types.is_struct(field.type):
        for i, child in enumerate(field.type):
            _check_nulls(array.field(i), child, f"{path}.{child.name}")


def read_dataset(path: Path | str) -> list[RunSummary]:
    """Read every `*.parquet` file under `path` (a file or a directory), validating each row."""
    root = Path(path)
    files = [root] if root.is_file() else sorted(root.rglob("*.parquet"))
    if not files:
        raise SchemaError(f"no .parquet files under {root}")
    rows: list[RunSummary] = []
    for file in files:
        table = pq.read_table(file)
        for name in OPTIONAL_COLUMNS:
            if name not in table.schema.names:
                table = table.append_column(SCHEMA.field(name),
                                            pa.nulls(table.num_rows, SCHEMA.field(name).type))
        try:
            check_schema(table.schema)
            for expected in SCHEMA:
                for chunk in table.column(expected.name).chunks:
                    _check_nulls(chunk, expected, expected.name)
        except SchemaError as exc:
            raise SchemaError(f"{file}: {exc}") from None
        for record in table.select(SCHEMA.names).to_pylist():
            row = RunSummary.from_record(record)
            validate_row(row)
            rows.append(row)
    ids = [r.run_id for r in rows]
    if len(ids) != len(set(ids)):
        raise SchemaError(f"duplicate run_id across the files under {root}")
    return rows


def spark_schema() -> Any:
    """SCHEMA as a pyspark StructType (for producers that write the rows with Spark)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(SCHEMA)
