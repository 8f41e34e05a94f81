"""`kraftlab compare`: the README's main job.

Three phases, each reported in OUT (default ./kraftlab-report/):

1. live: a 3-controller cluster on 127.0.0.1 in a fresh directory under OUT/live, an agreed
   leader, one write through every controller and a linearizable read of every key from every
   controller, then a SIGKILL of the leader timed to the first successful write issued after
   it (OUT/live/report.md). The cluster is stopped afterwards. Then (`--live-runs`, default
   2) real-process Jepsen queue runs on a fresh 3-controller + 3-broker cluster, one per
   replication mode (isr, quorum), the same fault (`kill-partition-leader`) and durability
   (acks=all, min.insync.replicas=2, RF 3), through the runner's API (harness/jepsen/runner.py),
   in OUT/live/jepsen/<mode>/; their summary rows (source `jepsen`) join the analysis.
2. matrix: the default scenario matrix on the deterministic simulator (harness/sim/runs/matrix.py:
   both replication modes, the main durability settings, every nemesis shape, 20 seeds),
   one run-summary row per run in OUT/runs (Parquet, docs/compare.md).
3. analysis: the Spark job (harness/spark/compare.py) over OUT/runs and OUT/live/jepsen, on
   `local[*]` by default, or `--master`, writing OUT/analysis/compare.md with tables, plots and computed conclusions.

OUT/report.md links the three; the command prints the conclusions and that path.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from collections.abc import Callable
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
# same fault and durability for both replication modes, so the report's jepsen section pairs
# them. acks=all, min.insync.replicas=2, RF 3 is the safe setting of docs/compare.md's matrix.
LIVE_MODES = ("isr", "quorum")
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


def run_matrix(out: Path, seeds: int, jobs: int | None,
               metadata: str = "raft") -> tuple[Path, float]:
    """Phase 2: the study's simulated matrix (harness/sim/runs/study_matrix.py), as run-summary
    Parquet under `out`."""
    from harness.sim.runs.study_matrix import run_study

    if out.exists():
        shutil.rmtree(out)  # rows of an earlier run must not mix into this analysis
    out.mkdir(parents=True)
    path, wall_s = run_study(out, seeds=seeds, jobs=jobs, metadata=metadata)
    return Path(path), wall_s


def run_analysis(runs: Path | list[Path], out: Path, master: str | None,
                 sim_vs_real: Any = None) -> Any:
    """Phase 3: the Spark comparison over `runs` (the matrix's rows, plus the live queue runs'
    directory when it has rows), written to `out`."""
    from harness.spark.compare import Progress, analyze
    from harness.spark.session import DEFAULT_MASTER, build_session

    stages = Progress()
    stages.stage("start Spark")
    spark = build_session(master or DEFAULT_MASTER)
    try:
        return analyze(spark, runs, out, stages, sim_vs_real=sim_vs_real)
    finally:
        spark.stop()


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


def write_index(out: Path, live: Path | None, live_ok: bool, runs: Path, matrix_wall_s: float,
                result: Any, queue: list[dict[str, Any]] | None = None) -> Path:
    lines = [
        "# kraftlab compare",
        "",
        f"Generated {datetime.now(UTC).isoformat(timespec='seconds')} by `kraftlab compare`.",
        "",
        "1. Live cluster check (3 controller processes on 127.0.0.1): "
        + (f"[{live.relative_to(out)}]({live.relative_to(out)}), every linearizable read "
           f"returned the written value: **{live_ok}**. " if live else "skipped or failed. ")
        + live_runs_line(out, queue or []),
        f"2. Simulated scenario matrix: run-summary Parquet in `{runs.relative_to(out)}` "
        f"({matrix_speed(runs, matrix_wall_s)}).",
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
    lines += ["## Conclusions (computed from the runs)", ""]
    for source, said in result.sentences.items():
        lines.append(f"### {source}")
        lines += [f"- {sentence}" for sentence in said]
        lines.append("")
    path = out / "report.md"
    path.write_text("\n".join(lines))
    return path


def cmd_compare(args: argparse.Namespace) -> int:
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    live, live_ok = None, True
    queue: list[dict[str, Any]] = []
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
                                            progress=tagged("sim-vs-real"))
        progress(f"sim-vs-real table: {table}")
    progress("phase 2/3: simulated scenario matrix")
    from harness.sim.runs.study_matrix import STUDY_SEEDS

    runs, wall_s = run_matrix(out / "runs", args.seeds or STUDY_SEEDS, args.jobs,
                              getattr(args, "metadata", "raft"))
    progress("phase 3/3: Spark analysis")
    inputs = [out / "runs"]
    if jepsen_dir.exists() and any(jepsen_dir.rglob("part-*.parquet")):
        inputs.append(jepsen_dir)  # the Spark job reads both; rows keep their source
    result = run_analysis(inputs, out / "analysis", args.master, comparison)
    index = write_index(out, live, live_ok, runs, wall_s, result, queue)
    for source, said in result.sentences.items():
        print(f"{source}:")
        for sentence in said:
            print(f"  - {sentence}")
    print(f"report: {index}")
    return 0 if (args.skip_live or live is not None) and live_ok else 1
