"""`kraftlab sim matrix` (harness/sim/matrix.py, matrix_cli.py): the matrix enumeration, one
valid summary row per run in K's schema, determinism, and the CLI writing Parquet."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from harness.cli import main
from harness.matrix_schema import read_dataset, validate_row
from harness.sim.data_nemesis import NEMESES
from harness.sim.data_simulation import DataRunConfig, run_data
from harness.sim.matrix import DEFAULT_SETTINGS, MatrixSpec, default_spec, run_one, summarize
from harness.sim.runner import quiet_logging


@pytest.fixture(autouse=True)
def _quiet_logging() -> None:
    quiet_logging()  # tests/conftest.py restores the previous configuration afterwards


def test_full_matrix_is_issue_8s_product() -> None:
    spec = MatrixSpec(seeds=1)
    configs = spec.configs()
    # 2 modes x 2 acks x 2 minISR x 2 unclean x 2 ELR x 2 RF; nemesis `none` has no duration.
    assert len(configs) == 64 * (1 + (len(NEMESES) - 1) * 3)
    assert len({c.key() for c in configs}) == len(configs)


def test_default_matrix_has_both_modes_and_every_nemesis() -> None:
    configs = default_spec(seeds=2).configs()
    assert {c.replication_mode for c in configs} == {"isr", "quorum"}
    assert {c.nemesis for c in configs} == set(NEMESES)
    assert len(configs) == len(DEFAULT_SETTINGS) * (1 + (len(NEMESES) - 1) * 2) * 2


def test_same_config_same_history_and_row() -> None:
    config = DataRunConfig(seed=5, acks="1", min_insync_replicas=1, nemesis="zombie-leader",
                           fault_duration_ms=1000)
    a, b = run_data(config), run_data(config)
    assert [e.to_json() for e in a.history.events] == [e.to_json() for e in b.history.events]
    row_a = dataclasses.replace(summarize(a), wall_duration_ms=0)
    row_b = dataclasses.replace(summarize(b), wall_duration_ms=0)
    assert row_a == row_b


def test_summary_row_follows_the_schema_and_counts_the_loss() -> None:
    out = run_one(DataRunConfig(seed=1, acks="1", min_insync_replicas=1, nemesis="zombie-leader",
                                fault_duration_ms=5000))
    row = out.row
    validate_row(row)
    assert row.lost_writes > 0 and row.leader_elections >= 1
    assert row.heal_ms == row.fault_end_ms == 8000 and row.fault_start_ms == 3000
    assert sum(s.writes_succeeded for s in row.per_second) == row.acked_writes
    assert row.nemesis_timeline[0].kind == "partition"
    assert out.invariant_violations == ()


def test_cli_writes_rows_readable_by_the_schema_reader(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "rows"
    code = main(["sim", "matrix", "--out", str(out), "--modes", "isr,quorum", "--acks", "all",
                 "--min-isr", "2", "--unclean", "false", "--elr", "false", "--rf", "3",
                 "--nemeses", "none,kill-leader", "--durations", "1", "--seeds", "2",
                 "--jobs", "2"])
    assert code == 0
    rows = read_dataset(out)
    assert len(rows) == 2 * 2 * 2
    assert {r.nemesis for r in rows} == {"none", "kill-leader"}
    assert all(r.lost_writes == 0 for r in rows)
    assert "simulated s per wall s" in capsys.readouterr().out


def test_cli_rejects_bad_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sim", "matrix", "--out", str(tmp_path), "--nemeses", "gremlins"]) == 2
    assert "INVALID_REQUEST" in capsys.readouterr().err
    assert main(["sim", "matrix", "--out", str(tmp_path), "--seeds", "0"]) == 2


def test_compare_index_reports_the_matrix_speed_from_the_rows(tmp_path: Path) -> None:
    # `kraftlab compare` names the matrix's runs and speed in its index, for a file or a dir.
    from harness.compare import matrix_speed
    from harness.matrix_schema import write_dataset

    rows = [run_one(DataRunConfig(seed=s, nemesis="none")).row for s in (1, 2)]
    path = write_dataset(rows, tmp_path / "runs", part="local")
    total_s = sum(r.duration_ms for r in rows) / 1000  # 2 x 11 s of workload
    assert total_s == 22.0
    assert matrix_speed(path, 0.5) == "2 runs, 0 s wall, 44 simulated workload s per wall s"
    assert matrix_speed(tmp_path / "runs", 2.0) == \
        "2 runs, 2 s wall, 11 simulated workload s per wall s"
