"""The scenario matrix as Spark tasks (`kraftlab compare`, `kraftlab sim matrix --engine spark`).

The driver ships kraftlab's code to the executors (harness/spark/ship.py), parallelizes the run
configs (plain dicts, harness/sim/runs/matrix.py `config_to_dict`) into tasks of
RUNS_PER_TASK runs, and each task runs its runs with the same pure-Python simulator (`run_one`) inside the
executor's Python worker, validates each row (harness/results/row.py) and yields it as a
record; Spark writes the records as Parquet with the run-summary schema (`spark_schema`).
Runs are pure functions of their config, so the rows equal the local engine's for the same
seeds, run id for run id, except `wall_duration_ms`.

What comes back to the driver besides the rows, through accumulators (task results, so a task
that Spark retries counts once): runs done and simulated ms (the progress line, the same
`Progress` as the local engine, fed from a thread while the job runs), the runs that raised
(run id, seed, config, error, the command that replays the run on the local engine), and the
simulator invariants a run broke (`RunOutput.invariant_violations`). A run that raises is
caught in the executor and reported, not retried: the simulator is deterministic, so a retry
would raise again, and Spark's own failure (a task retried four times, then a Py4J trace)
would not name the run.

Local and loopback masters are pinned to 127.0.0.1 by harness/spark/session.py; the executors'
Python is this interpreter on a local master, and on a cluster the one PYSPARK_PYTHON (or
spark-submit's `spark.pyspark.python`) names, `python3` on the executor's PATH by default.
"""

from __future__ import annotations

import math
import shlex
import threading
import time
import traceback
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.sim.runs.scenario_run import ScenarioConfig

# Runs per Spark task: enough that a task (~2-4 s of simulation) dwarfs Spark's per-task cost
# (docs/benchmarks.md), few enough that the progress line moves and cores stay busy to the end.
RUNS_PER_TASK = 20
# Rows per Parquet file Spark writes (the job reads a directory of any number of them).
ROWS_PER_FILE = 20_000
FAILURES_SHOWN = 10


class ListParam:
    """An accumulator of lists (pyspark's AccumulatorParam protocol): executors add one-item
    lists, the driver reads the concatenation."""

    def zero(self, value: list[Any]) -> list[Any]:
        return []

    def addInPlace(self, value1: list[Any], value2: list[Any]) -> list[Any]:  # noqa: N802
        value1.extend(value2)
        return value1


@dataclass(frozen=True, slots=True)
class RunFailure:
    """A run that raised inside an executor."""

    run_id: str
    seed: int
    config: dict[str, Any]
    error: str  # the exception's type and message
    where: str  # the last frames of the traceback

    def replay(self) -> str:
        return replay_command(self.config)


@dataclass(frozen=True, slots=True)
class SparkMatrixResult:
    runs: int
    rows: int
    wall_s: float
    sim_ms: int
    cpu_ms: int  # executors' CPU inside the runs (against wall x cores: how busy they were)
    tasks: int
    failures: tuple[RunFailure, ...]
    violations: tuple[str, ...]  # "<run_id>: <broken simulator invariant>"
    # Distinct "<executor's Python> <directory harness was imported from>": the shipped zip
    # (`.../kraftlab-<sha>.zip/harness`) wherever kraftlab was shipped.
    executors: tuple[str, ...] = ()


def replay_command(config: dict[str, Any]) -> str:
    """`kraftlab sim matrix` on the local engine, one process, exactly this run."""
    def flag(value: bool) -> str:
        return "true" if value else "false"

    duration_s = (config["fault_duration_ms"] or 1000) / 1000
    args = ["kraftlab", "sim", "matrix", "--out", "replay", "--engine", "local", "--jobs", "1",
            "--histories", "--modes", config["replication_mode"], "--acks", config["acks"],
            "--min-isr", str(config["min_insync_replicas"]),
            "--unclean", flag(config["unclean_leader_election"]),
            "--elr", flag(config["eligible_leader_replicas"]),
            "--leader-epoch", flag(config["leader_epoch_enable"]),
            "--rf", str(config["replication_factor"]), "--nemeses", config["nemesis"],
            "--durations", f"{duration_s:g}", "--first-seed", str(config["seed"]),
            "--seeds", "1", "--metadata", config["metadata"]]
    return shlex.join(args)


@dataclass(frozen=True, slots=True)
class _Accumulators:
    """What tasks report to the driver (pyspark Accumulators, added to in executors)."""

    done: Any  # runs finished, failed ones included
    sim_ms: Any  # simulated ms of the runs that finished
    cpu_ms: Any  # CPU ms of the executors' Python workers inside run_one
    failures: Any  # [RunFailure]
    violations: Any  # ["<run_id>: <broken invariant>"]
    executors: Any  # ["<python> <where harness was imported from>"], one per task


def _run_task(configs: Iterable[dict[str, Any]], acc: _Accumulators) -> Iterator[dict[str, Any]]:
    """One Spark task, in an executor's Python worker: run each config, yield its row."""
    import sys

    import harness
    from harness.results.row import validate_row
    from harness.sim.runs.matrix import config_from_dict, run_one
    from harness.sim.runs.runner import quiet_logging

    quiet_logging()  # an executor's Python worker: errors only, as in the local engine
    acc.executors.add([f"{sys.executable} {Path(harness.__file__).parent}"])
    for values in configs:
        config = config_from_dict(values)
        cpu = time.process_time()
        try:
            out = run_one(config)
            validate_row(out.row)
        except Exception as exc:  # any error of one run is reported with its seed, not retried
            acc.failures.add([RunFailure(config.key(), config.seed, values,
                                         f"{type(exc).__name__}: {exc}",
                                         "".join(traceback.format_exc(limit=-3)))])
            acc.done.add(1)
            continue
        finally:
            acc.cpu_ms.add(int((time.process_time() - cpu) * 1000))
        if out.invariant_violations:
            acc.violations.add([f"{out.row.run_id}: {v}" for v in out.invariant_violations])
        acc.done.add(1)
        acc.sim_ms.add(out.sim_ms)
        yield out.row.to_record()


def task_count(runs: int, parallelism: int, runs_per_task: int = RUNS_PER_TASK) -> int:
    """At least two tasks per core (a slow task does not idle the others), else
    `runs_per_task` runs per task; never more tasks than runs."""
    return max(1, min(runs, max(2 * parallelism, math.ceil(runs / runs_per_task))))


class _Watcher(threading.Thread):
    """Feeds `progress` from the accumulators while the job runs (reads on the driver only)."""

    def __init__(self, progress: Any, done: Any, sim_ms: Any, period_s: float = 0.5) -> None:
        super().__init__(name="kraftlab-matrix-progress", daemon=True)
        self.progress, self.done, self.sim_ms, self.period_s = progress, done, sim_ms, period_s
        self.stopped = threading.Event()
        self.seen = (0, 0)

    def poll(self) -> None:
        now = (int(self.done.value), int(self.sim_ms.value))
        if now[0] > self.seen[0] and self.progress is not None:
            self.progress.advance(now[0] - self.seen[0], now[1] - self.seen[1])
            self.seen = now

    def run(self) -> None:
        while not self.stopped.wait(self.period_s):
            self.poll()

    def finish(self) -> None:
        self.stopped.set()
        self.join()
        self.poll()


def run_spark(spark: Any, configs: Sequence[ScenarioConfig], out: Path | str,
              progress: Any = None, tasks: int | None = None) -> SparkMatrixResult:
    """Run every config as Spark tasks on `spark` (a SparkSession whose executors can import
    kraftlab: see ship.ship) and write the rows under `out` (a directory, replaced);
    `progress`: a harness.sim.runs.matrix.Progress, or None."""
    from harness.results.schema import spark_schema
    from harness.sim.runs.matrix import config_to_dict

    sc = spark.sparkContext
    dicts = [config_to_dict(c) for c in configs]
    n_tasks = tasks or task_count(len(dicts), sc.defaultParallelism)
    acc = _Accumulators(sc.accumulator(0), sc.accumulator(0), sc.accumulator(0),
                        *(sc.accumulator([], ListParam()) for _ in range(3)))
    started = time.monotonic()
    records = sc.parallelize(dicts, numSlices=max(1, n_tasks)).mapPartitions(
        lambda part: _run_task(part, acc))
    frame = spark.createDataFrame(records, schema=spark_schema())
    files = max(1, math.ceil(len(dicts) / ROWS_PER_FILE))
    if files < n_tasks:
        frame = frame.repartition(files)  # a few files, not one per task
    sc.setJobDescription(f"kraftlab matrix: {len(dicts)} simulated runs")
    watcher = _Watcher(progress, acc.done, acc.sim_ms)
    watcher.start()
    try:
        frame.write.mode("overwrite").parquet(str(out))
    finally:
        watcher.finish()
        sc.setJobDescription(None)
    failed = tuple(sorted(acc.failures.value, key=lambda f: f.run_id))
    return SparkMatrixResult(
        runs=len(dicts), rows=len(dicts) - len(failed), wall_s=time.monotonic() - started,
        sim_ms=int(acc.sim_ms.value), cpu_ms=int(acc.cpu_ms.value), tasks=n_tasks,
        failures=failed, violations=tuple(sorted(acc.violations.value)),
        executors=tuple(sorted(set(acc.executors.value))))


def report_failures(result: SparkMatrixResult, say: Any) -> None:
    """Name every failed run (the first FAILURES_SHOWN in full) and every broken invariant."""
    for failure in result.failures[:FAILURES_SHOWN]:
        say(f"run {failure.run_id} (seed {failure.seed}) failed in an executor: {failure.error}")
        say(f"  config: {failure.config}")
        say(f"  replay: {failure.replay()}")
        for line in failure.where.rstrip().splitlines():
            say(f"  | {line}")
    if len(result.failures) > FAILURES_SHOWN:
        say(f"... and {len(result.failures) - FAILURES_SHOWN} more failed runs")
    for line in result.violations[:FAILURES_SHOWN]:
        say(f"INVARIANT {line}")
