"""The matrix as Spark tasks on local[2] (harness/spark/matrix.py), kraftlab's code shipped as a
zip: the rows equal the local engine's for the same seeds (the simulator is deterministic),
apart from the wall-clock column; every run is simulated once; progress comes from the
accumulators; a run that raises in an executor is reported with its seed, config and replay
command while the other rows are written. Needs Java."""

from __future__ import annotations

import dataclasses
import io
import sys
from pathlib import Path

import pytest

from harness.results.schema import read_dataset
from harness.sim.runs.matrix import MatrixSpec, Progress, run_local
from harness.spark.matrix import run_spark
from harness.spark.session import build_session
from harness.spark.ship import ship
from tests.needs import require_java

pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True, scope="module")
def _java() -> None:
    require_java()


SPEC = MatrixSpec(modes=("isr", "quorum"), acks=("1",), min_isr=(1,), unclean=(False,),
                  elr=(False,), rf=(3,), nemeses=("none", "zombie-leader"),
                  durations_ms=(1000,), seeds=2)


@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    session = build_session("local[2]", app_name="kraftlab-tests-matrix", shuffle_partitions=2)
    ship(session, tmp_path_factory.mktemp("ship"))
    yield session
    session.stop()


def _without_wall(rows: list) -> dict:
    return {r.run_id: dataclasses.replace(r, wall_duration_ms=0) for r in rows}


def test_spark_engine_rows_equal_local_rows(spark, tmp_path: Path) -> None:
    configs = SPEC.configs()
    assert len(configs) == 8
    log = io.StringIO()
    result = run_spark(spark, configs, tmp_path / "spark", Progress(len(configs), log), tasks=3)
    spark_rows = read_dataset(tmp_path / "spark")
    local = run_local(configs, jobs=1)
    assert _without_wall(spark_rows) == _without_wall([o.row for o in local])
    assert any(r.lost_writes for r in spark_rows)  # the rows carry real findings
    assert {r.metadata_quorum for r in spark_rows} == {"raft"}  # the matrix's default quorum
    # Each run simulated exactly once (the DataFrame is written by one action; a second pass
    # would double the accumulated simulated time), and the progress saw all of them.
    assert (result.runs, result.rows, result.tasks) == (8, 8, 3)
    assert result.sim_ms == sum(o.sim_ms for o in local)
    assert result.failures == () and result.violations == ()
    assert log.getvalue().splitlines()[-1].split("]")[1].split()[0] == "8/8"
    # Local executors run this interpreter. They import kraftlab from the shipped zip, or from
    # the working directory when it is a checkout (Python puts it first on a worker's path):
    # the driver's code either way. tests/spark/test_standalone_cluster.py pins the zip.
    here = Path(__file__).resolve().parents[2] / "harness"
    assert result.executors and {e.split()[0] for e in result.executors} == {sys.executable}
    assert all(e.split()[1] == str(here) or ".zip/harness" in e for e in result.executors)


def test_a_run_that_raises_is_reported_with_its_seed_and_replay(spark, tmp_path: Path) -> None:
    good = SPEC.configs()[:2]
    bad = dataclasses.replace(good[0], nemesis="no-such-fault", seed=41)
    result = run_spark(spark, [*good, bad], tmp_path / "rows", tasks=2)
    # The other runs' rows are written; the failed run has none.
    assert sorted(r.run_id for r in read_dataset(tmp_path / "rows")) == sorted(
        c.key() for c in good)
    assert result.rows == 2 and len(result.failures) == 1
    failure = result.failures[0]
    assert (failure.run_id, failure.seed) == (bad.key(), 41)
    assert failure.config["nemesis"] == "no-such-fault"
    assert failure.error.startswith("ValueError: unknown nemesis 'no-such-fault'")
    assert "--nemeses no-such-fault" in failure.replay()
    assert "--first-seed 41 --seeds 1" in failure.replay()
