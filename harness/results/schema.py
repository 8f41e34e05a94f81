"""The run-summary row's Arrow schema, Parquet writer and reader (the row itself, its
invariants and `validate_row` are in harness/results/row.py and re-exported here).

Producers (`kraftlab sim matrix`, `kraftlab jepsen run --out`) build `RunSummary` values and
write them with `write_dataset(rows, out_dir, part=...)` (one Parquet file per worker or slice,
`part-<name>.parquet`); the Spark engine writes them with `spark_schema()`; the Spark job
(harness/spark) reads the directory as one dataset. `read_dataset(dir)` reads it back without
Spark and validates every row.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from harness.results.row import (
    ACKS,
    FLUSH_POLICIES,
    LATENCY_QUANTILES,
    METADATA_QUORUMS,
    NEMESES,
    OPTIONAL_COLUMNS,
    PHASES,
    PRODUCERS,
    REPLICATION_MODES,
    SCHEMA_VERSION,
    SOURCES,
    STUDY_COLUMNS,
    NemesisEvent,
    RunSummary,
    SchemaError,
    SecondCounts,
    Window,
    validate_row,
)

__all__ = [
    "ACKS", "FLUSH_POLICIES", "LATENCY_QUANTILES", "PHASES", "PRODUCERS", "STUDY_FIELDS",
    "METADATA_QUORUMS", "NEMESES", "OPTIONAL_COLUMNS", "REPLICATION_MODES", "SCHEMA",
    "SCHEMA_VERSION", "SOURCES", "NemesisEvent", "RunSummary", "SchemaError", "SecondCounts",
    "Window", "check_schema", "read_dataset", "spark_schema", "to_table", "validate_row",
    "write_dataset",
]


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
    pa.field("visibility_lag_p99_ms", pa.float64(), nullable=True),
    pa.field("visibility_lag_max_ms", pa.float64(), nullable=True),
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
    pa.field("system", pa.string(), nullable=True),
    *STUDY_FIELDS,
    pa.field("schema_version", pa.int32(), nullable=False),
])
assert SCHEMA.names == [f.name for f in fields(RunSummary)], "schema and dataclass drifted"
assert tuple(f.name for f in STUDY_FIELDS) == STUDY_COLUMNS, "study columns drifted"


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
