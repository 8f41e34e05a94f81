"""`kraftlab sim matrix --engine spark`: slices of the matrix as Spark tasks.

The driver parallelizes the run configs (plain dicts) into slices; each task runs its slice with
the same pure-Python simulator (harness/sim/runs/matrix.py `run_one`) inside the executor's Python
worker and yields the summary rows as records; Spark writes them as Parquet with the schema
(harness.results.schema.spark_schema). Runs are pure functions of their config, so the rows equal
the local engine's for the same seeds, except `wall_duration_ms`.

Local masters are pinned to 127.0.0.1 by harness/spark/session.py (SPARK_LOCAL_IP, the driver's
bind address and host); executors use this interpreter (PYSPARK_PYTHON) unless set otherwise.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from harness.sim.runs.scenario_run import ScenarioConfig


def _run_slice(configs: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    from harness.sim.runs.matrix import config_from_dict, run_one
    from harness.sim.runs.runner import quiet_logging

    quiet_logging()  # an executor's Python worker: errors only, as in the local engine
    for values in configs:
        yield run_one(config_from_dict(values)).row.to_record()


def run_spark(configs: Sequence[ScenarioConfig], out: Path, master: str | None,
              slices: int | None = None) -> int:
    """Run every config as Spark tasks and write the rows under `out`; returns the row count."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from harness.results.schema import spark_schema
    from harness.sim.runs.matrix import config_to_dict
    from harness.spark.session import build_session

    session = build_session(master, app_name="kraftlab-sim-matrix")
    sc = session.sparkContext
    dicts = [config_to_dict(c) for c in configs]
    n = max(1, min(len(dicts), slices or 4 * sc.defaultParallelism))
    records = sc.parallelize(dicts, numSlices=n).mapPartitions(_run_slice)
    frame = session.createDataFrame(records, schema=spark_schema())
    frame.write.mode("overwrite").parquet(str(out))
    return len(dicts)
