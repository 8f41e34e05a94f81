"""`kraftlab compare`: the README's main job (for now: a live check of the metadata quorum).

What it does, and nothing more (the report says the same): bring up a 3-controller cluster in a
fresh directory under OUT (default ./kraftlab-report/), wait for an agreed leader, write one key
through every controller and read every key back linearizably from every controller, SIGKILL the
leader and time how long until a write issued after the kill succeeds, then write OUT/report.md
with the quorum status and these measurements, stop the cluster and print the report's path.
A later issue grows this into the quorum-versus-ISR comparison (sim matrix + Spark analysis).
"""

from __future__ import annotations

import argparse
import json
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


def cmd_compare(args: argparse.Namespace) -> int:
    out = Path(args.out).resolve()
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
        return 1
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
    print(path)
    return 0 if data["kv_all_ok"] else 1


def register(sub: Any) -> None:
    parser = sub.add_parser("compare", help="the main job: run the quorum check, write a report")
    parser.add_argument("--out", default="./kraftlab-report", help="report directory")
    parser.set_defaults(handler=cmd_compare)
