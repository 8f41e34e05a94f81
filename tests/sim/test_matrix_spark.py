"""`kraftlab sim matrix --engine spark` on local[2] gives the local engine's rows for the same
seeds (the simulator is deterministic), apart from the wall-clock column. Needs Java."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from harness.results.schema import read_dataset
from harness.sim.runs.matrix import MatrixSpec, run_local
from harness.spark.matrix import run_spark

pytestmark = pytest.mark.integration


@pytest.mark.skipif(shutil.which("java") is None, reason="Spark needs Java")
def test_spark_engine_rows_equal_local_rows(tmp_path: Path) -> None:
    spec = MatrixSpec(modes=("isr", "quorum"), acks=("1",), min_isr=(1,), unclean=(False,),
                      elr=(False,), rf=(3,), nemeses=("none", "zombie-leader"),
                      durations_ms=(1000,), seeds=2)
    configs = spec.configs()
    assert len(configs) == 8
    run_spark(configs, tmp_path / "spark", "local[2]", slices=2)
    spark_rows = read_dataset(tmp_path / "spark")
    local_rows = [o.row for o in run_local(configs, jobs=1)]

    def key(rows: list) -> dict:
        return {r.run_id: dataclasses.replace(r, wall_duration_ms=0) for r in rows}

    assert key(spark_rows) == key(local_rows)
    assert any(r.lost_writes for r in local_rows)  # the rows carry real findings
    assert {r.metadata_quorum for r in spark_rows} == {"raft"}  # the matrix's default quorum
