"""The run-summary schema without Spark: write/read round trip and the validator's refusals."""

from __future__ import annotations

import dataclasses

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from harness.results.schema import (
    SCHEMA,
    STUDY_FIELDS,
    RunSummary,
    SchemaError,
    SecondCounts,
    Window,
    check_schema,
    read_dataset,
    spark_schema,
    validate_row,
    write_dataset,
)
from tests.spark.fixture_runs import fixture_rows, run, sec


def test_round_trip_keeps_every_field_across_parts(tmp_path):
    rows = fixture_rows()
    first = write_dataset(rows[:10], tmp_path, part="worker-0")
    write_dataset(rows[10:], tmp_path, part="worker-1")
    assert first.name == "part-worker-0.parquet"
    assert not list(tmp_path.glob(".*"))  # no temporary file left behind
    back = {r.run_id: r for r in read_dataset(tmp_path)}
    assert back == {r.run_id: r for r in rows}
    g1c = back["g1-c"]
    assert g1c.unavailability_windows == (Window(2000, 4000), Window(4100, 4300))
    assert g1c.per_second[2] == SecondCounts(3, 10, 0, 5, 5, 5, 0, 5, 0)
    assert back["g8"].heal_ms is None and back["g8"].metadata_linearizable is True
    assert back["g5-q"].recovery_time_ms is None


def test_file_schema_is_the_declared_one(tmp_path):
    path = write_dataset(fixture_rows()[:2], tmp_path)
    schema = pq.read_schema(path)
    check_schema(schema)
    assert schema.field("per_second").type.value_type.field("writes_indeterminate").type \
        == pa.int64()
    assert schema.field("acks").type == pa.string()
    # The Spark schema used by Spark writers is the same one.
    assert [f.name for f in spark_schema().fields] == SCHEMA.names


@pytest.mark.parametrize(("change", "message"), [
    ({"acks": "-1"}, "acks='-1'"),
    ({"replication_mode": "paxos"}, "replication_mode"),  # raft is a mode now
    ({"source": "prod"}, "source"),
    ({"lost_writes": 61}, "lost_writes=61 > acked_writes=60"),
    ({"min_insync_replicas": 4}, "min_insync_replicas=4"),
    ({"heal_ms": None}, "all set or all null"),
    ({"fault_start_ms": 5000}, "fault_start_ms <= fault_end_ms"),
    ({"unavailability_windows": (Window(300, 200),)}, "unavailability_windows"),
    ({"per_second": (SecondCounts(0, 5, 1, 1, 1),)}, "writes_attempted=5 != "),
    ({"per_second": (sec(1), sec(1))}, "strictly increasing"),
    ({"nemesis": "Kill Leader"}, "kebab-case"),
    ({"duplicates": -1}, "duplicates=-1 is negative"),
    ({"unclean_elections": 2}, "unclean_elections > leader_elections"),
    ({"flush_policy": "sometimes"}, "flush_policy='sometimes'"),
    ({"producer": "curl"}, "producer='curl'"),
    ({"replica_lag_time_max_ms": 0}, "replica_lag_time_max_ms=0 must be positive"),
    ({"latency_p50_ms_during": 9.0, "latency_p99_ms_during": 3.0}, "p50 <= p99 <= p99.9"),
    ({"probe_slots_during": 10}, "both or neither"),
    ({"probe_slots_during": 10, "probe_ok_during": 11, "probe_interval_ms": 10},
     "probe_ok_during=11 outside [0, 10]"),
    ({"probe_slots_after": 3, "probe_ok_after": 1}, "without probe_interval_ms"),
])
def test_validator_names_the_run_and_column(change, message):
    good = fixture_rows()[0]
    validate_row(good)
    with pytest.raises(SchemaError, match="run 'g1-a'") as info:
        validate_row(dataclasses.replace(good, **change))
    assert message in str(info.value)


def test_recovery_without_heal_is_refused():
    row = run("x", "isr", "1", 1, "none", 1, [sec(0, 1)], recovery_time_ms=5)
    with pytest.raises(SchemaError, match="recovery_time_ms set without a heal"):
        validate_row(row)


def test_writer_refuses_bad_rows_and_writes_nothing(tmp_path):
    rows = fixture_rows()
    bad = dataclasses.replace(rows[1], acks="2")
    with pytest.raises(SchemaError, match="acks='2'"):
        write_dataset([rows[0], bad], tmp_path)
    with pytest.raises(SchemaError, match="duplicate run_id"):
        write_dataset([rows[0], rows[0]], tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_reader_refuses_duplicates_across_parts_and_foreign_files(tmp_path):
    rows = fixture_rows()
    write_dataset(rows[:2], tmp_path, part="a")
    write_dataset(rows[1:3], tmp_path, part="b")
    with pytest.raises(SchemaError, match="duplicate run_id across"):
        read_dataset(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    pq.write_table(pa.table({"run_id": ["x"], "seed": [1]}), other / "x.parquet")
    with pytest.raises(SchemaError, match="column 'source' is missing"):
        read_dataset(other)
    with pytest.raises(SchemaError, match="no .parquet files"):
        read_dataset(tmp_path / "nothing")


def test_reader_refuses_a_wrong_type(tmp_path):
    table = pa.Table.from_pylist([fixture_rows()[0].to_record()], schema=SCHEMA)
    table = table.set_column(SCHEMA.get_field_index("seed"), "seed",
                             pa.array(["1"], pa.string()))
    pq.write_table(table, tmp_path / "part-x.parquet")
    with pytest.raises(SchemaError, match="column 'seed' has type string"):
        read_dataset(tmp_path)


def test_from_record_is_the_inverse_of_to_record():
    for row in fixture_rows():
        assert RunSummary.from_record(row.to_record()) == row


def test_reader_accepts_spark_style_lists_but_not_nulls(tmp_path):
    # Spark names list items `element` and declares every field nullable: same data, accepted.
    loose = pa.schema([pa.field(f.name, _loosen(f.type)) for f in SCHEMA])
    rows = fixture_rows()[:3]
    table = pa.Table.from_pylist([r.to_record() for r in rows], schema=loose)
    pq.write_table(table, tmp_path / "part-spark.parquet")
    assert read_dataset(tmp_path) == rows
    # ...but a null where the schema has none is refused, nested ones included.
    records = [r.to_record() for r in rows]
    records[1]["per_second"][0]["reads_failed"] = None
    pq.write_table(pa.Table.from_pylist(records, schema=loose), tmp_path / "part-spark.parquet")
    with pytest.raises(SchemaError, match=r"'per_second\[\]\.reads_failed' has 1 null"):
        read_dataset(tmp_path)


def _loose_field(field: pa.Field) -> pa.Field:
    return pa.field(field.name, _loosen(field.type))


def _loosen(t: pa.DataType) -> pa.DataType:
    if pa.types.is_list(t):
        return pa.list_(pa.field("element", _loosen(t.value_type)))
    if pa.types.is_struct(t):
        return pa.struct([_loose_field(f) for f in t])
    return t


def test_metadata_quorum_column_is_optional_and_checked(tmp_path):
    rows = fixture_rows()[:3]
    tagged = [dataclasses.replace(rows[0], metadata_quorum="raft"),
              dataclasses.replace(rows[1], metadata_quorum="abstract"), rows[2]]
    write_dataset(tagged, tmp_path / "new")
    assert [r.metadata_quorum for r in read_dataset(tmp_path / "new")] == ["raft", "abstract",
                                                                           None]
    # A file written before the column existed reads back with it null.
    old = pa.Table.from_pylist([r.to_record() for r in tagged], schema=SCHEMA)
    (tmp_path / "old").mkdir()
    pq.write_table(old.drop_columns(["metadata_quorum"]), tmp_path / "old" / "part-0.parquet")
    assert [r.metadata_quorum for r in read_dataset(tmp_path / "old")] == [None, None, None]
    with pytest.raises(SchemaError, match="metadata_quorum='paxos'"):
        validate_row(dataclasses.replace(rows[0], metadata_quorum="paxos"))


def test_system_column_is_optional_and_checked(tmp_path):
    rows = fixture_rows()[:3]
    tagged = [dataclasses.replace(rows[0], system="kraftlab"),
              dataclasses.replace(rows[1], system="kafka"), rows[2]]
    write_dataset(tagged, tmp_path / "new")
    assert [r.system for r in read_dataset(tmp_path / "new")] == ["kraftlab", "kafka", None]
    # A file written before the column existed reads back with it null.
    old = pa.Table.from_pylist([r.to_record() for r in tagged], schema=SCHEMA)
    (tmp_path / "old").mkdir()
    pq.write_table(old.drop_columns(["system"]), tmp_path / "old" / "part-0.parquet")
    assert [r.system for r in read_dataset(tmp_path / "old")] == [None, None, None]
    with pytest.raises(SchemaError, match="system='redpanda'"):
        validate_row(dataclasses.replace(rows[0], system="redpanda"))


STUDY = dict(flush_policy="fsync-before-ack", producer="kafka", replica_lag_time_max_ms=2000,
             broker_session_timeout_ms=1000, election_timeout_ms=None, acked_before=40,
             latency_p50_ms_before=4.5, latency_p99_ms_before=9.0, latency_p999_ms_before=9.5,
             probe_interval_ms=10, probe_slots_during=200, probe_ok_during=150,
             replay_command="kraftlab sim matrix --replay x")


def test_study_columns_round_trip_and_old_files_read_them_as_null(tmp_path):
    rows = fixture_rows()[:2]
    raft = dataclasses.replace(rows[0], replication_mode="raft", **STUDY)
    write_dataset([raft, rows[1]], tmp_path / "new")
    back = read_dataset(tmp_path / "new")
    assert back[0] == raft and back[1] == rows[1]
    old = pq.read_table(tmp_path / "new" / "part-0.parquet")
    pq.write_table(old.drop_columns([f.name for f in STUDY_FIELDS]), tmp_path / "old.parquet")
    again = read_dataset(tmp_path / "old.parquet")
    assert again[0].flush_policy is None and again[0].latency_p99_ms_before is None
    assert again[0].probe_ok_during is None and again[0].replay_command is None
    assert again[1] == rows[1]
