"""The run-summary row in plain Python: one row per scenario run, shared by the simulator
matrix, Jepsen runs and the Spark comparison job (docs/compare.md documents every column).

This module imports nothing outside the standard library, so a Spark executor builds and
validates rows with the simulator's own dependencies only (harness/spark/ship.py);
harness/results/schema.py adds the Arrow schema, the Parquet writer and the reader.

Invariants (checked by `validate_row`, so a bad producer fails at write time, not in the report):
- `source` is sim|jepsen, `replication_mode` isr|quorum|raft, `acks` "0"|"1"|"all".
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
from dataclasses import asdict, dataclass, field, fields
from typing import Any

SCHEMA_VERSION = 1
SOURCES = ("sim", "jepsen")
REPLICATION_MODES = ("isr", "quorum", "raft")
ACKS = ("0", "1", "all")
# The matrix's nemesis names (docs/compare.md). Jepsen runs map their fault names onto these; other
# kebab-case names are accepted so new shapes need no schema change.
NEMESES = (
    "none", "isolate-partition-leader", "leader-cut-from-followers-only", "zombie-leader",
    "random-halves", "majorities-ring", "bridge", "isolate-controller-leader",
    "metadata-quorum-down", "kill-leader", "pause-leader", "kill-2-of-3",
    "unclean-crash-losing-unflushed-tail", "flapping", "cut-followers-then-kill-leader",
)
_NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
# When a write is durable (docs/compare.md, the study): Kafka's default, the page cache with
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
    # The system a `jepsen` row ran against: "kraftlab" (its own cluster) or "kafka" (Apache
    # Kafka, the peer kit: `kraftlab jepsen run --system kafka`); null for `sim` rows and for
    # files written before it existed (OPTIONAL_COLUMNS).
    system: str | None = None
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
    # whatever is in flight; a slot is ok when its write was acknowledged (within
    # harness/sim/runs/measures.py PROBE_OK_MS). Unavailable time = (slots - ok) * interval.
    probe_interval_ms: int | None = None
    probe_slots_before: int | None = None
    probe_ok_before: int | None = None
    probe_slots_during: int | None = None
    probe_ok_during: int | None = None
    probe_slots_after: int | None = None
    probe_ok_after: int | None = None
    # How long records acknowledged during the fault stayed invisible to consumers (ack -> the
    # partition's HW passed them), p99 and max in ms (harness/sim/runs/measures.py).
    visibility_lag_p99_ms: float | None = None
    visibility_lag_max_ms: float | None = None
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


# The study's columns (all nullable), in the row's order.
STUDY_COLUMNS = (
    "flush_policy", "producer", "replica_lag_time_max_ms", "broker_session_timeout_ms",
    "election_timeout_ms",
    *[c for phase in PHASES for c in (f"acked_{phase}",
                                      *[f"latency_{q}_ms_{phase}" for q, _ in LATENCY_QUANTILES])],
    "probe_interval_ms",
    *[c for phase in PHASES for c in (f"probe_slots_{phase}", f"probe_ok_{phase}")],
    "visibility_lag_p99_ms", "visibility_lag_max_ms",
    "replay_command",
)
# Columns added after schema version 1 was first written: a file without them reads as null.
OPTIONAL_COLUMNS = ("metadata_quorum", "system", *STUDY_COLUMNS)
METADATA_QUORUMS = ("raft", "abstract")
SYSTEMS = ("kraftlab", "kafka")

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
    for name, choices in (("flush_policy", FLUSH_POLICIES), ("producer", PRODUCERS)):
        value = getattr(row, name)
        if value is not None and value not in choices:
            raise _fail(row, f"{name}={value!r}, expected one of {choices} or null")
    if row.metadata_quorum is not None and row.metadata_quorum not in METADATA_QUORUMS:
        raise _fail(row, f"metadata_quorum={row.metadata_quorum!r}, expected one of "
                         f"{METADATA_QUORUMS} or null")
    if row.system is not None and row.system not in SYSTEMS:
        raise _fail(row, f"system={row.system!r}, expected one of {SYSTEMS} or null")
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
