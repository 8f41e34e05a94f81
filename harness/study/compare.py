"""`kraftlab compare`: the README's main job.

Three phases, each reported in OUT (default ./kraftlab-report/):

1. live: a 3-controller cluster on 127.0.0.1 in a fresh directory under OUT/live, an agreed
   leader, one write through every controller and a linearizable read of every key from every
   controller, then a SIGKILL of the leader timed to the first successful write issued after
   it (OUT/live/report.md). The cluster is stopped afterwards. Then (`--live-runs`, default
   3) real-process Jepsen queue runs on a fresh 3-controller + 3-broker cluster, one per
   replication mode (isr, quorum, raft), the same fault (`kill-partition-leader`) and durability
   (acks=all, min.insync.replicas=2, RF 3), through the runner's API (harness/jepsen/runner.py),
   in OUT/live/jepsen/<mode>/; their summary rows (source `jepsen`) join the analysis.
2. matrix: a scenario matrix on the deterministic simulator (`--preset`,
   harness/study/presets.py; the default: the study of harness/sim/runs/study_matrix.py, its
   arms under their faults and the trade-off curves), one run-summary row per run in OUT/runs
   (Parquet, docs/compare.md). By default the runs are Spark tasks (harness/spark/matrix.py)
   on `local[*]` or `--master`, kraftlab's code shipped to the executors, and Spark writes the
   rows; `--engine local` runs them in local processes instead (the same rows).
3. analysis: the Spark job (harness/spark/compare.py) over OUT/runs and OUT/live/jepsen, in the
   matrix's Spark session, writing OUT/analysis/compare.md with tables, plots and computed
   conclusions.

OUT/report.md links the three; the command prints the conclusions and that path.

Exit code: 0 when everything ran and held; 1 when the live check failed or a read returned
the wrong value, a real-process queue run could not run or was not `valid` (anomalies, or the
cluster never recovered: the runner's verdict), a simulated run failed, or a run broke a
simulator invariant; 2 on bad options. The report is written either way, with the reasons.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harness.admin.client import AdminClient, AdminError
from harness.admin.describe_quorum import format_replication, format_status
from harness.bench.failover import measure_one_failover
from harness.launcher import cluster as cl


def progress(message: str) -> None:
    print(f"  {message}", file=sys.stderr, flush=True)


def kv_round(cluster: cl.ClusterFile) -> list[dict[str, Any]]:
    """PUT one key per controller, then a linearizable GET of every key on every controller."""
    rows = []
    clients = {n.id: AdminClient(n.host, n.admin_port, 5.0) for n in cluster.nodes}
    written = {}
    for node_id, client in clients.items():
        key, value = f"compare-{node_id}", f"written-via-{node_id}"
        t0 = time.perf_counter()
        answer = client.kv_put(key, value)
        rows.append({"op": "put", "node": node_id, "key": key, "ok": True,
                     "version": answer["version"], "ms": (time.perf_counter() - t0) * 1000})
        written[key] = value
    for node_id, client in clients.items():
        for key, value in written.items():
            t0 = time.perf_counter()
            try:
                answer = client.kv_get(key, "linearizable")
                ok = answer.get("value") == value
            except AdminError as exc:
                answer, ok = {"error": exc.error}, False
            rows.append({"op": "get(linearizable)", "node": node_id, "key": key, "ok": ok,
                         "version": answer.get("version"), "ms": (time.perf_counter() - t0) * 1000})
    return rows


def write_report(out: Path, data: dict[str, Any]) -> Path:
    lines = [
        "# kraftlab compare report",
        "",
        f"Generated {data['generated']} by `kraftlab compare`. Cluster `{data['cluster_id']}`: "
        f"{data['controllers']} controller processes on 127.0.0.1, fsync on, data in "
        f"`{data['data_dir']}`.",
        "",
        "What was measured (nothing else): one write per controller and a linearizable read of "
        "every key on every controller over the admin HTTP API, then one SIGKILL of the leader "
        "and the time from the kill to the completion of the first successful write issued "
        "after it (writer rotating over all controllers, 300 ms per-request timeout). One run, "
        "one failover: for a median of 5 use `kraftlab bench failover`.",
        "",
        "## Quorum status before the kill (kafka-metadata-quorum describe --status)",
        "",
        "```", data["status_before"], "```",
        "",
        "## Replication before the kill (describe --replication)",
        "",
        "```", data["replication_before"], "```",
        "",
        "## Key/value round",
        "",
        "| op | via controller | key | ok | version | ms |",
        "|---|---|---|---|---|---|",
    ]
    for row in data["kv"]:
        lines.append(f"| {row['op']} | {row['node']} | {row['key']} | {row['ok']} | "
                     f"{row['version']} | {row['ms']:.1f} |")
    fo = data["failover"]
    lines += [
        "",
        f"All reads returned the written value: **{data['kv_all_ok']}**.",
        "",
        "## Failover (SIGKILL of the leader)",
        "",
        f"- killed controller {fo['killed']} (the leader)",
        f"- new leader: controller {fo['new_leader']}",
        f"- kill -> first successful write after the kill: **{fo['elapsed_ms']:.0f} ms** "
        f"({fo['attempts']} write attempts)",
        "",
        "## Quorum status after the failover",
        "",
        "```", data["status_after"], "```",
        "",
    ]
    path = out / "report.md"
    path.write_text("\n".join(lines))
    (out / "report.json").write_text(json.dumps(data, indent=2, default=str))
    return path


def leader_status(cluster: cl.ClusterFile) -> tuple[str, str]:
    client = cl.leader_client(cluster)
    return (format_status(client.get_json("/quorum/status")),
            format_replication(client.get_json("/quorum/replication"), human=False))


def live_check(out: Path) -> tuple[Path | None, bool]:
    """Phase 1: (the live report's path or None on failure, every read returned its value)."""
    out.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    data_dir = out / f"cluster-{stamp}"
    cluster = cl.create_cluster(data_dir, 3, {})
    progress(f"cluster {cluster.cluster_id} in {data_dir}")
    try:
        for node in cluster.nodes:
            cl.start_node(cluster, data_dir, node)
            progress(f"started controller {node.id} (pid {node.pid})")
        leader = cl.wait_for_leader(cluster, [n.id for n in cluster.nodes], 30, progress)
        progress(f"controller {leader} leads; all controllers agree")
        status_before, replication_before = leader_status(cluster)
        progress("key/value round: a write via every controller, linearizable reads everywhere")
        kv = kv_round(cluster)
        progress(f"SIGKILL of leader {leader}; timing the first successful write after it")
        sample = measure_one_failover(cluster, data_dir, "compare-failover")
        progress(f"new leader {sample.new_leader} accepted a write {sample.elapsed_ms:.0f} ms "
                 f"after the kill")
        status_after, _ = leader_status(cluster)
    except (cl.ClusterError, AdminError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        for node in cluster.nodes:
            cl.stop_node(node, force=True, timeout_s=5)
        return None, False
    data = {
        "generated": datetime.now(UTC).isoformat(timespec="seconds"),
        "cluster_id": cluster.cluster_id,
        "controllers": len(cluster.nodes),
        "data_dir": str(data_dir),
        "status_before": status_before,
        "replication_before": replication_before,
        "kv": kv,
        "kv_all_ok": all(r["ok"] for r in kv),
        "failover": {"killed": sample.killed, "new_leader": sample.new_leader,
                     "elapsed_ms": sample.elapsed_ms, "attempts": sample.attempts},
        "status_after": status_after,
    }
    path = write_report(out, data)
    for node in cluster.nodes:
        if not cl.stop_node(node, force=False, timeout_s=10):
            cl.stop_node(node, force=True, timeout_s=5)
        node.pid = None
    cluster.save(data_dir)
    progress("cluster stopped")
    return path, bool(data["kv_all_ok"])


# The live phase's real-process queue runs (simulation and reality in one job): the
# same fault and durability for every replication mode (the study's three arms), so the
# report's jepsen section pairs them. acks=all, min.insync.replicas=2, RF 3 is the safe setting of docs/compare.md's matrix.
LIVE_MODES = ("isr", "quorum", "raft")
LIVE_NEMESIS = "kill-partition-leader"  # the matrix's `kill-leader` (summary_row.JEPSEN_TO_MATRIX)
LIVE_TIME_LIMIT_S = 12.0
# One fault per run: 1 s lead-in, the fault held 5 s (longer than broker.session.timeout.ms=3000,
# runner.QUEUE_OVERRIDES, so the killed leader is fenced and a follower elected before the heal
# restarts it), then quiet to the time limit (LIVE_QUIET_S is longer than what is left). Fixed,
# not drawn: both runs hold the fault equally long, their rows meet the matrix's 5 s cells
# (the Spark job rounds a real run's measured duration to whole seconds) and pair.
LIVE_FAULT_S = (5.0, 5.0)
LIVE_QUIET_S = (60.0, 60.0)


def tagged(tag: str) -> Callable[[str], None]:
    """A progress function prefixing each line with `[tag]` (the runner's own lines)."""

    def say(message: str) -> None:
        progress(f"  [{tag}] {message}")

    return say


def live_queue_runs(out: Path, modes: tuple[str, ...] = LIVE_MODES,
                    time_limit_s: float = LIVE_TIME_LIMIT_S, seed: int = 1,
                    fault_s: tuple[float, float] = LIVE_FAULT_S) -> list[dict[str, Any]]:
    """Real-process Jepsen queue runs, one per replication mode in `modes`, on ONE cluster of
    3 controllers + 3 brokers (a fresh directory under `out`; startup is paid once), each under
    `LIVE_NEMESIS` with acks=all, min.insync.replicas=2, RF 3, in its own topic. Each run writes
    `out/<mode>/` (history, report.html, results.json, summary/part-<run_id>.parquet: one
    comparison row, source `jepsen`). The cluster is stopped afterwards (its own PIDs only).
    Returns one dict per mode: mode, out dir, verdict, exit code, row summary, or error."""
    from harness.jepsen.runner import RunError, RunOptions, bring_down, bring_up, run
    from harness.jepsen.workload_queue import QueueOptions

    out.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    data_dir = (out / f"cluster-{stamp}").resolve()
    base = RunOptions(out_dir=out, workload="queue", progress=progress)
    done: list[dict[str, Any]] = []
    try:
        bring_up(base, data_dir)
        for mode in modes:
            progress(f"queue run, replication mode {mode}: {LIVE_NEMESIS}, acks=all, "
                     f"min.insync.replicas=2, RF 3, {time_limit_s:g} s")
            run_out = out / mode
            if run_out.exists():
                shutil.rmtree(run_out)  # one row per run: an older row must not be re-read
            options = RunOptions(
                out_dir=run_out, workload="queue", nemesis=LIVE_NEMESIS,
                time_limit_s=time_limit_s, seed=seed, data_dir=data_dir,
                queue=QueueOptions(topic=f"compare-{mode}", replication_mode=mode, acks="all",
                                   min_insync_replicas=2, replication_factor=3, partitions=3,
                                   producers=3, consumers=2, rate=60.0, op_timeout_s=2.5),
                fault_s=fault_s, quiet_s=LIVE_QUIET_S, lead_in_s=1.0,
                recovery_timeout_s=15.0, final_timeout_s=10.0,
                progress=tagged(mode))
            try:
                result = run(options)
            except RunError as exc:
                progress(f"queue run ({mode}) failed: {exc}")
                done.append({"mode": mode, "out": run_out, "error": str(exc)})
                continue
            row = result.results.get("summary_row", {})
            progress(f"queue run ({mode}): {result.verdict}; acked {row.get('acked_writes')}, "
                     f"lost {row.get('lost_writes')}, recovery {row.get('recovery_time_ms')} ms")
            done.append({"mode": mode, "out": run_out, "verdict": result.verdict,
                         "exit_code": result.exit_code, "row": row})
    except (cl.ClusterError, RunError, OSError) as exc:
        progress(f"queue runs stopped: {exc}")
    finally:
        if cl.ClusterFile.path_in(data_dir).exists():
            stuck = bring_down(data_dir)
            progress("queue cluster stopped" if not stuck else f"WARNING: nodes {stuck} did not stop")
    return done


@dataclass(frozen=True, slots=True)
class MatrixOutcome:
    """Phase 2's result: where the rows are and what went wrong."""

    runs_dir: Path | str  # a directory, or a URI (`--rows hdfs://...`) Spark wrote to
    runs: int
    wall_s: float
    engine: str  # "spark" or "local"
    master: str | None  # the Spark master the runs ran on (engine spark)
    failures: tuple[Any, ...] = ()  # harness.spark.matrix.RunFailure
    violations: tuple[str, ...] = ()  # "<run_id>: <broken simulator invariant>"


def start_spark(master: str | None, stages: Any) -> Any:
    """The pipeline's one SparkSession (phases 2 and 3)."""
    from harness.spark.session import build_session

    stages.stage("start Spark")
    return build_session(master, app_name="kraftlab-compare")


def run_matrix_spark(spark: Any, out: Path, spec: Any) -> MatrixOutcome:
    """Phase 2 as Spark tasks: kraftlab's code shipped to the executors, rows written by Spark."""
    from harness.sim.runs.matrix import Progress
    from harness.spark.matrix import report_failures, run_spark
    from harness.spark.ship import ship

    configs = spec.configs()
    zip_path = ship(spark)
    progress(f"{len(configs)} runs as Spark tasks on {spark.sparkContext.master} "
             f"(code shipped as {zip_path.name})")
    result = run_spark(spark, configs, out, Progress(len(configs)))
    progress(f"{result.runs} runs in {result.tasks} Spark tasks, {result.wall_s:.0f} s wall, "
             f"{result.runs / max(result.wall_s, 1e-9):.2f} runs/s, "
             f"{result.cpu_ms / 1000 / max(result.runs, 1):.3f} CPU s per run in the executors")
    for executor in result.executors[:5]:
        progress(f"executors ran: {executor}")  # their Python, and where kraftlab came from
    report_failures(result, progress)
    return MatrixOutcome(out, result.runs, result.wall_s, "spark", spark.sparkContext.master,
                         result.failures, result.violations)


def run_matrix_local(out: Path, spec: Any, jobs: int | None) -> MatrixOutcome:
    """Phase 2 in local processes (`--engine local`)."""
    from harness.results.schema import write_dataset
    from harness.sim.runs.matrix import Progress, run_local

    configs = spec.configs()
    progress(f"{len(configs)} runs in local processes")
    bar = Progress(len(configs))
    violations: list[str] = []
    outputs = run_local(configs, jobs, progress=bar, on_output=lambda o: violations.extend(
        f"{o.row.run_id}: {v}" for v in o.invariant_violations))
    write_dataset([o.row for o in outputs], out, part="local")
    for line in violations[:10]:
        progress(f"INVARIANT {line}")
    return MatrixOutcome(out, len(configs), bar.wall_s, "local", None, (), tuple(violations))


def run_pipeline(out: Path, spec: Any, engine: str, master: str | None, jobs: int | None,
                 extra_inputs: list[Path], rows: str | None = None,
                 sim_vs_real: Any = None) -> tuple[MatrixOutcome, Any]:
    """Phases 2 and 3 in one SparkSession; the rows go to `rows` (a URI Spark writes, engine
    spark only) or OUT/runs. With `--engine local` the session starts after the local
    processes have run (no fork beside a live JVM gateway)."""
    from harness.spark.compare import Progress, analyze, is_uri

    runs: Path | str = rows if rows and is_uri(rows) else Path(rows or out / "runs").resolve()
    if isinstance(runs, Path) and runs.exists():
        shutil.rmtree(runs)  # rows of an earlier run must not mix into this analysis
    stages = Progress()
    local = None
    if engine == "local":
        assert isinstance(runs, Path), "the local engine writes local files"
        runs.mkdir(parents=True)
        local = run_matrix_local(runs, spec, jobs)
    spark = start_spark(master, stages)
    try:
        matrix = local or run_matrix_spark(spark, runs, spec)
        progress("phase 3/3: Spark analysis")
        result = analyze(spark, [runs, *extra_inputs], out / "analysis", stages,
                         sim_vs_real=sim_vs_real)
    finally:
        spark.stop()
    return matrix, result


def matrix_speed(runs: Path, wall_s: float) -> str:
    """`N runs, W s wall, X simulated workload s per wall s` from the rows' durations."""
    import pyarrow.parquet as pq

    files = [runs] if runs.is_file() else sorted(runs.rglob("*.parquet"))
    durations = [pq.read_table(f, columns=["duration_ms"]).column(0).to_pylist() for f in files]
    count = sum(len(d) for d in durations)
    sim_s = sum(sum(d) for d in durations) / 1000
    # Workload seconds (the rows' duration_ms); the matrix's progress line also counts each
    # run's quiet settle period, so it prints a higher figure.
    return (f"{count} runs, {wall_s:.0f} s wall, {sim_s / max(wall_s, 1e-9):.0f} simulated "
            f"workload s per wall s")


def live_runs_line(out: Path, queue: list[dict[str, Any]]) -> str:
    """The index's line on the live queue runs: one entry per mode, with its verdict."""
    if not queue:
        return "Real-process queue runs: none (skipped, `--live-runs 0`, or the cluster failed)."
    said = []
    for run in queue:
        link = f"{run['out'].relative_to(out)}/report.html"
        if "error" in run:
            said.append(f"{run['mode']}: could not run ({run['error']})")
        else:
            row = run["row"]
            said.append(f"[{run['mode']}]({link}): {run['verdict']}, "
                        f"{row.get('acked_writes')} acknowledged writes, "
                        f"{row.get('lost_writes')} lost")
    return (f"Real-process queue runs (3 controllers + 3 brokers, `{LIVE_NEMESIS}`, acks=all, "
            f"min.insync.replicas=2, RF 3; rows in the analysis as source `jepsen`): "
            + "; ".join(said) + ".")


def problems(live_wanted: bool, live: Path | None, live_ok: bool, modes: tuple[str, ...],
             queue: list[dict[str, Any]], matrix: MatrixOutcome) -> list[str]:
    """Why `kraftlab compare` exits 1 (empty: exit 0). A queue run counts as failed unless its
    verdict is `valid` (the runner's exit code 0): `invalid` is an anomaly the checker found,
    `unknown` a cluster that never came back."""
    said = []
    if live_wanted and live is None:
        said.append("the live cluster check did not complete")
    if not live_ok:
        said.append("a linearizable read on the live cluster did not return the written value")
    ran = {run["mode"]: run for run in queue}
    for mode in modes:
        run = ran.get(mode)
        if run is None:
            said.append(f"real-process queue run ({mode}) did not run")
        elif "error" in run:
            said.append(f"real-process queue run ({mode}) could not run: {run['error']}")
        elif run["exit_code"] != 0:
            said.append(f"real-process queue run ({mode}) is {run['verdict']} "
                        f"(exit code {run['exit_code']}; {run['out']}/report.html)")
    if matrix.failures:
        said.append(f"{len(matrix.failures)} simulated runs failed (replay commands above and "
                    f"in the report)")
    if matrix.violations:
        said.append(f"{len(matrix.violations)} simulator invariants broke "
                    f"(first: {matrix.violations[0]})")
    return said


def write_index(out: Path, live: Path | None, live_ok: bool, matrix: MatrixOutcome,
                result: Any, queue: list[dict[str, Any]] | None = None,
                failed: list[str] | None = None, preset: str = "default") -> Path:
    runs = matrix.runs_dir
    if isinstance(runs, Path) and runs.is_relative_to(out):
        rows = f"`{runs.relative_to(out)}` ({matrix_speed(runs, matrix.wall_s)})"
    elif isinstance(runs, Path):
        rows = f"`{runs}` ({matrix_speed(runs, matrix.wall_s)})"
    else:
        rows = f"`{runs}` ({matrix.runs} runs, {matrix.wall_s:.0f} s wall)"
    where = (f"Spark tasks on `{matrix.master}`" if matrix.engine == "spark"
             else "local processes")
    lines = [
        "# kraftlab compare",
        "",
        f"Generated {datetime.now(UTC).isoformat(timespec='seconds')} by `kraftlab compare`.",
        "",
        "1. Live cluster check (3 controller processes on 127.0.0.1): "
        + (f"[{live.relative_to(out)}]({live.relative_to(out)}), every linearizable read "
           f"returned the written value: **{live_ok}**. " if live else "skipped or failed. ")
        + live_runs_line(out, queue or []),
        f"2. Simulated scenario matrix (preset `{preset}`, {where}): run-summary Parquet in "
        f"{rows}.",
        f"3. Spark analysis: [{result.report.relative_to(out)}]({result.report.relative_to(out)})"
        " (tables, plots, conclusions)"
        + (f"; the study for an operator, verdicts first: "
           f"[{result.html.relative_to(out)}]({result.html.relative_to(out)})."
           if getattr(result, "html", None) else "."),
        "",
    ]
    from harness.spark.verdicts import verdict_lines

    verdicts = verdict_lines(getattr(result, "verdicts", []))
    if verdicts:
        lines += ["## Verdicts (equal safety first)", "", *verdicts, ""]
    if failed:
        lines += ["## Failed (exit code 1)", "", *[f"- {why}" for why in failed], ""]
    for failure in matrix.failures[:10]:
        lines += [f"- run `{failure.run_id}` (seed {failure.seed}): {failure.error}; replay: "
                  f"`{failure.replay()}`"]
    if matrix.failures:
        lines.append("")
    lines += ["## Conclusions (computed from the runs)", ""]
    for source, said in result.sentences.items():
        lines.append(f"### {source}")
        lines += [f"- {sentence}" for sentence in said]
        lines.append("")
    path = out / "report.md"
    path.write_text("\n".join(lines))
    return path


def matrix_spec(args: argparse.Namespace) -> Any:
    """The preset with `--seeds` and `--faults` applied; ValueError names a bad option."""
    from harness.study.presets import preset_spec

    faults = tuple(f.strip() for f in args.faults.split(",")) if args.faults else None
    return preset_spec(args.preset, args.seeds, faults, getattr(args, "metadata", "raft"))


def cmd_compare(args: argparse.Namespace) -> int:
    try:
        spec = matrix_spec(args)
        if args.rows and args.engine == "local":
            raise ValueError("--rows is where Spark writes the rows: it needs --engine spark")
    except ValueError as exc:
        print(f"kraftlab compare: INVALID_REQUEST: {exc}", file=sys.stderr)
        return 2
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    live, live_ok = None, True
    queue: list[dict[str, Any]] = []
    modes: tuple[str, ...] = ()
    jepsen_dir = out / "live" / "jepsen"
    if jepsen_dir.exists():
        shutil.rmtree(jepsen_dir)  # rows of an earlier compare must not mix into this analysis
    if not args.skip_live:
        progress("phase 1/3: live cluster check")
        live, live_ok = live_check(out / "live")
        modes = LIVE_MODES[:args.live_runs]
        if modes:
            progress(f"phase 1/3: real-process queue runs ({', '.join(modes)})")
            queue = live_queue_runs(jepsen_dir, modes, args.live_time_limit)
    comparison = None
    if getattr(args, "sim_vs_real_runs", 0):
        from harness.study.sim_vs_real import run_sim_vs_real

        progress(f"phase 1/3: simulation against real processes "
                 f"({args.sim_vs_real_runs} runs per fault and mode)")
        comparison, table = run_sim_vs_real(out / "sim-vs-real", args.sim_vs_real_runs,
                                            progress=tagged("sim-vs-real"),
                                            with_kafka=getattr(args, "sim_vs_real_kafka", False),
                                            client=getattr(args, "sim_vs_real_client", "native"))
        progress(f"sim-vs-real table: {table}")
    progress(f"phase 2/3: simulated scenario matrix (preset {args.preset}, engine {args.engine})")
    extra = []
    if jepsen_dir.exists() and any(jepsen_dir.rglob("part-*.parquet")):
        extra.append(jepsen_dir)  # the Spark job reads both; rows keep their source
    from harness.spark.session import default_master

    matrix, result = run_pipeline(out, spec, args.engine, default_master(args.master),
                                  args.jobs, extra, args.rows, comparison)
    failed = problems(not args.skip_live, live, live_ok, modes, queue, matrix)
    index = write_index(out, live, live_ok, matrix, result, queue, failed, args.preset)
    for source, said in result.sentences.items():
        print(f"{source}:")
        for sentence in said:
            print(f"  - {sentence}")
    for why in failed:
        print(f"FAILED: {why}")
    print(f"report: {index}")
    return 1 if failed else 0



def add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default="./kraftlab-report", help="report directory")
    parser.add_argument("--preset", choices=("default", "tiny", "large", "matrix", "cross"),
                        default="default",
                        help="the scenario matrix: default (the study, 1,368 runs), tiny (72 "
                             "runs), large (the study's larger preset, for a cluster), matrix "
                             "and cross (the matrices before the study); docs/compare.md")
    parser.add_argument("--seeds", type=int, default=None,
                        help="seeds per matrix cell (default: the preset's; 8 for default)")
    parser.add_argument("--faults", default=None,
                        help="comma-separated nemesis names instead of the preset's")
    parser.add_argument("--engine", choices=("spark", "local"), default="spark",
                        help="run the matrix as Spark tasks (default) or in local processes")
    parser.add_argument("--master", default=None,
                        help="Spark master URL for the matrix and the analysis (default "
                             "local[*]; under spark-submit, spark-submit's)")
    parser.add_argument("--rows", default=None, metavar="URI",
                        help="where Spark writes the matrix rows (default OUT/runs): on a "
                             "cluster of several machines, a location the driver and every "
                             "executor read, e.g. hdfs:///kraftlab/runs or a shared mount")
    parser.add_argument("--jobs", type=int, default=None,
                        help="simulator processes of --engine local (default: all cores)")
    parser.add_argument("--skip-live", "--no-live", action="store_true",
                        help="skip the whole live phase (cluster check and queue runs)")
    parser.add_argument("--live-runs", type=int, choices=(0, 1, 2, 3), default=3,
                        help="real-process queue runs in the live phase: 3 (default: isr, "
                             "quorum and raft), 2 (isr and quorum), 1 (isr only) or 0 (none)")
    parser.add_argument("--live-time-limit", type=float, default=LIVE_TIME_LIMIT_S,
                        help=f"seconds of workload per queue run (default {LIVE_TIME_LIMIT_S:g})")
    parser.add_argument("--metadata", choices=("raft", "abstract"), default="raft",
                        help="the matrix's metadata side: 3 simulated Raft voters (default) or "
                             "the abstract single controller (docs/compare.md)")
    parser.add_argument("--sim-vs-real-runs", type=int, default=0, metavar="N",
                        help="also run six faults x isr, quorum and raft N times on real processes "
                             "and on the simulator at the same settings, and table where they "
                             "agree (OUT/sim-vs-real/; about 14 s per real run; default 0)")
    parser.add_argument("--sim-vs-real-client", choices=("native", "kafka"), default="native",
                        help="with --sim-vs-real-runs: the real kraftlab runs' producers and "
                             "consumers: native (harness/client) or kafka (aiokafka through "
                             "the brokers' Kafka listeners, the Kafka column's own clients)")
    parser.add_argument("--sim-vs-real-kafka", action="store_true",
                        help="with --sim-vs-real-runs: Apache Kafka (the peer kit, installed by "
                             ".ci/install) as the reference column, the same faults where its "
                             "target does them with the same shape, N runs each")


if __name__ == "__main__":
    # spark-submit runs this file as a script (docs/compare.md); `--py-files kraftlab.zip`
    # (python -m harness.spark.ship) makes the packages importable on the driver and ships
    # them to the executors.
    from harness.runtime.logs import configure_logging

    configure_logging(level="warning")
    script = argparse.ArgumentParser(prog="compare.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_options(script)
    sys.exit(cmd_compare(script.parse_args()))
