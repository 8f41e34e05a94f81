"""`kraftlab compare`: the README's main job.

Three phases, each reported in OUT (default ./kraftlab-report/):

1. live: a 3-controller cluster on 127.0.0.1 in a fresh directory under OUT/live, an agreed
   leader, one write through every controller and a linearizable read of every key from every
   controller, then a SIGKILL of the leader timed to the first successful write issued after
   it (OUT/live/report.md). The cluster is stopped afterwards.
2. matrix: the default scenario matrix on the deterministic simulator (harness/sim/matrix.py:
   both replication modes, the main durability settings, every nemesis shape, 20 seeds),
   one run-summary row per run in OUT/runs (Parquet, docs/compare.md).
3. analysis: the Spark job (harness/spark/compare.py) on `local[*]` by default, or `--master`,
   writing OUT/analysis/compare.md with tables, plots and computed conclusions.

OUT/report.md links the three; the command prints the conclusions and that path.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harness import cluster as cl
from harness.admin_client import AdminClient, AdminError
from harness.bench.failover import measure_one_failover
from harness.quorum_cli import format_replication, format_status


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
    from harness.quorum_cli import leader_client

    client = leader_client(cluster)
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


def run_matrix(out: Path, seeds: int, jobs: int | None,
               metadata: str = "raft") -> tuple[Path, float]:
    """Phase 2: the default simulated scenario matrix, as run-summary Parquet under `out`."""
    from harness.sim.matrix import run_default

    if out.exists():
        shutil.rmtree(out)  # rows of an earlier run must not mix into this analysis
    out.mkdir(parents=True)
    path, wall_s = run_default(out, seeds=seeds, jobs=jobs, metadata=metadata)
    return Path(path), wall_s


def run_analysis(runs: Path, out: Path, master: str | None) -> Any:
    """Phase 3: the Spark comparison over `runs`, written to `out`."""
    from harness.spark.compare import Progress, analyze
    from harness.spark.session import DEFAULT_MASTER, build_session

    stages = Progress()
    stages.stage("start Spark")
    spark = build_session(master or DEFAULT_MASTER)
    try:
        return analyze(spark, runs, out, stages)
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


def write_index(out: Path, live: Path | None, live_ok: bool, runs: Path, matrix_wall_s: float,
                result: Any) -> Path:
    lines = [
        "# kraftlab compare",
        "",
        f"Generated {datetime.now(UTC).isoformat(timespec='seconds')} by `kraftlab compare`.",
        "",
        "1. Live cluster check (3 controller processes on 127.0.0.1): "
        + (f"[{live.relative_to(out)}]({live.relative_to(out)}), every linearizable read "
           f"returned the written value: **{live_ok}**." if live else "skipped or failed."),
        f"2. Simulated scenario matrix: run-summary Parquet in `{runs.relative_to(out)}` "
        f"({matrix_speed(runs, matrix_wall_s)}).",
        f"3. Spark analysis: [{result.report.relative_to(out)}]({result.report.relative_to(out)})"
        " (tables, plots, conclusions).",
        "",
        "## Conclusions (computed from the runs)",
        "",
    ]
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
    if not args.skip_live:
        progress("phase 1/3: live cluster check")
        live, live_ok = live_check(out / "live")
    progress("phase 2/3: simulated scenario matrix")
    from harness.sim.matrix import DEFAULT_SEEDS

    runs, wall_s = run_matrix(out / "runs", args.seeds or DEFAULT_SEEDS, args.jobs,
                              getattr(args, "metadata", "raft"))
    progress("phase 3/3: Spark analysis")
    result = run_analysis(out / "runs", out / "analysis", args.master)
    index = write_index(out, live, live_ok, runs, wall_s, result)
    for source, said in result.sentences.items():
        print(f"{source}:")
        for sentence in said:
            print(f"  - {sentence}")
    print(f"report: {index}")
    return 0 if (args.skip_live or live is not None) and live_ok else 1


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "compare", help="the main job: live cluster check, simulated matrix, Spark analysis")
    parser.add_argument("--out", default="./kraftlab-report", help="report directory")
    parser.add_argument("--seeds", type=int, default=None,
                        help="seeds per matrix cell (default 20: the default matrix)")
    parser.add_argument("--jobs", type=int, default=None, help="simulator processes (default: all cores)")
    parser.add_argument("--master", default=None, help="Spark master URL (default local[*])")
    parser.add_argument("--skip-live", action="store_true", help="skip the live cluster check")
    parser.add_argument("--metadata", choices=("raft", "abstract"), default="raft",
                        help="the matrix's metadata side: 3 simulated Raft voters (default) or "
                             "the abstract single controller (docs/compare.md)")
    parser.set_defaults(handler=cmd_compare)
