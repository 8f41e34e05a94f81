"""kraftlab on a real Spark standalone cluster (tests/spark/standalone.py: a master and a
worker on 127.0.0.1 from pyspark's own Spark) whose worker's Python is a plain virtualenv
without kraftlab (tests/spark/conftest.py `executor_python`): the matrix runs as Spark tasks
from the shipped zip, Spark writes the rows, and they equal the local engine's run id for run
id. In the default suite: `kraftlab sim matrix --engine spark --master` (the cluster, the
shipping, the rows; ~1.5 min on 2 shared cores). Marked slow (~2 min each): `kraftlab compare
--master` end to end (matrix, then the analysis in the same session, and the report), and the
same through `spark-submit` with the command docs/compare.md gives. The cluster's PIDs are
stopped whatever happens."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness.results.schema import read_dataset
from harness.sim.runs.matrix import default_spec, run_local
from harness.sim.runs.runner import quiet_logging
from harness.study.presets import preset_spec
from tests.needs import require_java
from tests.spark import standalone
from tests.spark.conftest import clean_env

pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True, scope="module")
def _java() -> None:
    require_java()

ROOT = Path(__file__).resolve().parents[2]
# 9 settings x 1 fault x 2 seeds: every arm of the comparison, a minute of simulation at most.
MATRIX = ["--preset", "tiny", "--faults", "kill-leader", "--seeds", "2", "--no-live"]


@pytest.fixture(scope="module")
def cluster(executor_python, tmp_path_factory):
    # The worker's `python3` (PySpark's default executor Python) is the bare virtualenv's.
    env = clean_env(PATH=f"{executor_python.parent}{os.pathsep}{os.environ['PATH']}")
    started = standalone.start(tmp_path_factory.mktemp("standalone"), env)
    yield started
    standalone.stop(started)


@pytest.fixture(scope="module")
def local_rows():
    quiet_logging()  # tests/conftest.py restores the configuration afterwards
    configs = preset_spec("tiny", 2, ("kill-leader",)).configs()
    return _without_wall([o.row for o in run_local(configs, jobs=1)])


def _without_wall(rows: list) -> dict:
    return {r.run_id: dataclasses.replace(r, wall_duration_ms=0) for r in rows}


def _check_executors(said: str, executor_python: Path, zip_name: str) -> None:
    """The executors ran the bare virtualenv's Python on the shipped zip."""
    ran = [line.split("executors ran: ", 1)[1] for line in said.splitlines()
           if "executors ran: " in line]
    assert ran, said[-4000:]
    for line in ran:
        python, code = line.split()
        assert Path(python).parent == executor_python.parent
        assert re.search(r"(^|/)" + zip_name + r"/harness$", code), code


def test_sim_matrix_runs_on_the_cluster_from_the_shipped_zip(cluster, executor_python,
                                                            tmp_path) -> None:
    configs = default_spec(1).configs()[:6]
    out = tmp_path / "rows"
    done = subprocess.run(
        [sys.executable, "-m", "harness", "sim", "matrix", "--engine", "spark", "--master",
         cluster.url, "--seeds", "1", "--runs", "6", "--out", str(out)],
        cwd=tmp_path, env=clean_env(PYTHONPATH=str(ROOT)), capture_output=True, text=True,
        timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    assert "runs 6 in " in done.stdout and "failed 0" in done.stdout
    _check_executors(done.stderr, executor_python, r"kraftlab-[0-9a-f]{12}\.zip")
    quiet_logging()
    assert _without_wall(read_dataset(out)) == _without_wall(
        [o.row for o in run_local(configs, jobs=1)])


def _check_run(out: Path, done: subprocess.CompletedProcess, executor_python: Path,
               local_rows: dict, zip_name: str) -> None:
    assert done.returncode == 0, done.stderr[-4000:]
    assert _without_wall(read_dataset(out / "runs")) == local_rows
    # (spark-submit sends the Python driver's stderr to its stdout.)
    _check_executors(done.stdout + done.stderr, executor_python, zip_name)
    compare = (out / "analysis" / "compare.md").read_text()
    assert "spark://127.0.0.1:" in compare and f"sim: {len(local_rows)}" in compare
    index = (out / "report.md").read_text()
    assert "Spark tasks on `spark://127.0.0.1:" in index and "## Conclusions" in index
    for png in ("availability_vs_consistency.png", "unavailability_by_nemesis.png"):
        assert (out / "analysis" / png).stat().st_size > 0


@pytest.mark.slow
def test_compare_with_master_runs_the_matrix_on_the_cluster(cluster, executor_python,
                                                           local_rows, tmp_path) -> None:
    out = tmp_path / "report"
    done = subprocess.run(
        [sys.executable, "-m", "harness", "compare", "--master", cluster.url, *MATRIX,
         "--out", str(out)],
        cwd=tmp_path, env=clean_env(PYTHONPATH=str(ROOT)), capture_output=True, text=True,
        timeout=900)
    _check_run(out, done, executor_python, local_rows, r"kraftlab-[0-9a-f]{12}\.zip")


@pytest.mark.slow
def test_spark_submit_with_the_documented_command(cluster, executor_python, local_rows,
                                                  tmp_path) -> None:
    # docs/compare.md: build the zip, then spark-submit the pipeline with it in --py-files.
    zip_path = tmp_path / "kraftlab.zip"
    built = subprocess.run([sys.executable, "-m", "harness.spark.ship", str(zip_path)],
                           cwd=ROOT, env=clean_env(), capture_output=True, text=True,
                           timeout=120)
    assert built.returncode == 0, built.stderr
    out = tmp_path / "report"
    submit = Path(sys.executable).parent / "spark-submit"
    done = subprocess.run(
        [str(submit), "--master", cluster.url, "--conf", "spark.driver.host=127.0.0.1",
         "--conf", "spark.driver.bindAddress=127.0.0.1", "--py-files", str(zip_path),
         str(ROOT / "harness" / "study" / "compare.py"), *MATRIX, "--out", str(out)],
        cwd=tmp_path, env=clean_env(PYSPARK_DRIVER_PYTHON=sys.executable,
                                    SPARK_LOCAL_IP="127.0.0.1"),
        capture_output=True, text=True, timeout=900)
    _check_run(out, done, executor_python, local_rows, re.escape(zip_path.name))
