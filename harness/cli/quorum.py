"""`kraftlab quorum describe --status|--replication`: what kafka-metadata-quorum.sh prints.

Both views come from the active controller (Kafka sends DescribeQuorum to the leader): the command
asks any answering controller who leads, then asks the leader. Voters are shown as `[1,2,3]` (the
3.8 format: kraftlab has no directory ids). `--human-readable` shows timestamps as "N ms ago".
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from harness.admin.client import AdminClient, AdminError
from harness.launcher import cluster as cl


def leader_client(cluster: cl.ClusterFile) -> AdminClient:
    views = cl.quorum_view(cluster)
    for view in views.values():
        if view and view.get("leader_id") is not None:
            node = cluster.node(view["leader_id"])
            return AdminClient(node.host, node.admin_port)
    answering = [i for i, v in views.items() if v is not None]
    raise cl.ClusterError(
        f"LEADER_NOT_AVAILABLE: no controller knows a leader (answering: {answering})"
    )


def format_status(status: dict[str, Any]) -> str:
    rows = [
        ("ClusterId", status["cluster_id"]),
        ("LeaderId", status["leader_id"]),
        ("LeaderEpoch", status["leader_epoch"]),
        ("HighWatermark", status["high_watermark"]),
        ("MaxFollowerLag", status["max_follower_lag"]),
        ("MaxFollowerLagTimeMs", status["max_follower_lag_time_ms"]),
        ("CurrentVoters", json.dumps(status["current_voters"], separators=(",", ":"))),
        ("CurrentObservers", json.dumps(status["current_observers"], separators=(",", ":"))),
    ]
    return "\n".join(f"{name + ':':<24}{value}" for name, value in rows)


def format_replication(rows: list[dict[str, Any]], human: bool) -> str:
    now_ms = int(time.time() * 1000)

    def ts(value: int) -> str:
        if not human or value < 0:
            return str(value)
        return f"{max(0, now_ms - value)} ms ago"

    header = ["NodeId", "LogEndOffset", "Lag", "LastFetchTimestamp", "LastCaughtUpTimestamp",
              "Status"]
    table = [header] + [
        [str(r["node_id"]), str(r["log_end_offset"]), str(r["lag"]),
         ts(r["last_fetch_timestamp"]), ts(r["last_caught_up_timestamp"]), r["status"]]
        for r in rows
    ]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in table
    )


def cmd_describe(args: argparse.Namespace) -> int:
    data_dir = Path(args.data_dir) if args.data_dir else cl.default_data_dir()
    try:
        cluster = cl.ClusterFile.load(data_dir)
        client = leader_client(cluster)
        if args.replication:
            print(format_replication(client.get_json("/quorum/replication"), args.human_readable))
        else:
            print(format_status(client.get_json("/quorum/status")))
    except (cl.ClusterError, AdminError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


def register(sub: Any) -> None:
    parser = sub.add_parser("quorum", help="describe the metadata quorum")
    verbs = parser.add_subparsers(dest="quorum_command", metavar="VERB")
    verbs.required = True
    describe = verbs.add_parser("describe", help="like kafka-metadata-quorum.sh describe")
    which = describe.add_mutually_exclusive_group(required=True)
    which.add_argument("--status", action="store_true", help="leader, epoch, HW, lag, voters")
    which.add_argument("--replication", action="store_true", help="per-replica offsets and lag")
    describe.add_argument("--human-readable", action="store_true",
                          help="timestamps as 'N ms ago'")
    describe.add_argument("--data-dir", help="cluster directory (default ./kraftlab-data)")
    describe.set_defaults(handler=cmd_describe)
